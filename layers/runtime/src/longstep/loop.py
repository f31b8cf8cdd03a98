"""The agent loop, one function per state machine task: start, model turn, tool call, finish.

Each function takes the task's small JSON input (a cursor into the checkpoint log), does one
durable step, and returns the next cursor. The transcript never travels through Step Functions.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from typing import Any

from longstep import escalations, faults, keys, policy, signals, waiting
from longstep.agent import Agent
from longstep.artifacts import PREVIEW_CHARS, offload_if_large
from longstep.errors import InvalidInputError, NonDeterminismError, RunConflictError
from longstep.inputs import Cursor, StartInput, ToolCallItem, parse_model
from longstep.messages import Message, text_of, tool_result_block, tool_uses, user_text
from longstep.models.base import ModelReply
from longstep.runtime import Runtime
from longstep.steps import run_step
from longstep.store import AlreadyRecordedError, StepRecord
from longstep.tools.builtins import WAIT_FOR, WaitForArgs
from longstep.tools.executor import execute_call, failure, success
from longstep.tools.registry import ToolContext

# Final outputs longer than this are stored in S3 and the execution output keeps a preview.
MAX_INLINE_OUTPUT_CHARS = 32 * 1024


def start_run(rt: Runtime, event: Any) -> dict[str, Any]:
    """Init: validate the start input, create the run (or attach to it) and find where to resume.

    Raises:
        InvalidInputError: a field of the start input is malformed (the message names it).
        UnknownAgentError: the agent is not registered.
        RunConflictError: the run id exists with another agent or goal.
    """
    start = parse_model(StartInput, event, "start input")
    agent = rt.resolve_agent(start.agent)
    record = {
        "agent": start.agent,
        "goal": start.goal,
        "model": start.model.model_dump(),
        "max_turns": start.max_turns or rt.settings.max_turns,
        "created_at": time.time(),
    }
    resumed = False
    try:
        rt.store.put_once(start.run_id, keys.RUN_RECORD, record)
    except AlreadyRecordedError:
        existing = load_run(rt, start.run_id)
        for name in ("agent", "goal"):
            if existing[name] != record[name]:
                raise RunConflictError(
                    f"run {start.run_id} exists with a different {name}: {existing[name]!r} != {record[name]!r}"
                ) from None
        resumed = True
    steps = rt.store.steps(start.run_id) if resumed else []
    return {"run_id": start.run_id, "next_turn": completed_turns(steps), "resumed": resumed, "resolution": None}


def model_turn(rt: Runtime, event: Any) -> dict[str, Any]:
    """ModelTurn: replay or make the model call of turn ``next_turn`` and route on the reply."""
    cursor = parse_model(Cursor, event, "model turn input")
    run = load_run(rt, cursor.run_id)
    agent = rt.resolve_agent(run["agent"])
    turn = cursor.next_turn
    base = {"run_id": cursor.run_id, "turn": turn, "next_turn": turn + 1, "calls": [], "resolution": None}
    if turn >= int(run["max_turns"]):
        return {**base, "next_turn": turn, "route": "done", "stop": "max_turns", "replayed": False}

    resolution = cursor.resolution or {}

    def call_model() -> dict[str, Any]:
        if resolution.get("action") == "skip":  # a human supplied the reply
            return ModelReply(message={"role": "assistant", "content": [{"text": str(resolution.get("result"))}]}, stop_reason="end_turn").to_record()
        steps = rt.store.steps(cursor.run_id)
        if resolution.get("action") != "retry":  # a human's retry resets the budgets
            policy.check_budgets(correction_kinds(steps, turn), agent.max_model_corrections, agent.max_verifier_failures)
        messages = transcript(run, steps, upto_turn=turn)
        provider = rt.model_for(run["model"])
        faults.reach(faults.BEFORE_MODEL, cursor.run_id, turn)
        reply = provider.converse(
            system=agent.system_prompt, messages=messages, tools=agent.tools.specs(), turn=turn - injected_turns(steps, turn)
        )
        faults.reach(faults.AFTER_MODEL, cursor.run_id, turn)
        record = faults.intercept(faults.MODEL_REPLY, cursor.run_id, turn, {**reply.to_record(), "at": time.time()})
        return _judge(agent, record, messages, cursor.run_id, turn)

    outcome = run_step(
        rt.store,
        rt.lock,
        run_id=cursor.run_id,
        sk=keys.model_step_key(turn),
        kind="model",
        name="converse",
        lock_key=keys.idempotency_key(cursor.run_id, turn),
        execute=call_model,
    )
    faults.reach(faults.AFTER_RECORD, cursor.run_id, turn)
    reply = ModelReply.from_record(outcome.result)
    calls = []
    for index, use in enumerate(tool_uses(reply.message)):
        known = agent.tools.tools.get(use["name"])
        calls.append(
            {
                "run_id": cursor.run_id,
                "turn": turn,
                "call": index,
                "tool": use["name"],
                "approval": bool(known and known.requires_approval),
                **_wait_routing(use, outcome.result),
            }
        )
    record = outcome.result
    corrected = bool(record.get("correction")) or not record.get("verdict", {"ok": True})["ok"]
    return {
        **base,
        "calls": calls,
        "route": "tools" if calls else ("correct" if corrected else "done"),
        "stop": reply.stop_reason,
        "replayed": outcome.replayed,
    }


def _wait_routing(use: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
    """How the state machine carries out a ``wait_for`` call: a Wait state or a task token.

    Invalid arguments get no routing: CallTool then answers the model with the schema error.
    """
    if use["name"] != WAIT_FOR:
        return {"wait": "none"}
    try:
        args = WaitForArgs.model_validate(use["input"])
    except ValueError:
        return {"wait": "none"}
    if args.event is not None:
        return {"wait": "event", "event": args.event, "timeout_seconds": args.timeout_seconds}
    # Relative to when the reply was recorded, so a replay waits for the same instant.
    return {"wait": "timer", "wait_until": args.timer_until(dt.datetime.fromtimestamp(record.get("at", time.time()), dt.timezone.utc))}


def _judge(agent: Agent, record: dict[str, Any], messages: list[Message], run_id: str, turn: int) -> dict[str, Any]:
    """Add the feedback a reply needs before it is recorded: an empty reply, a rejected answer."""
    message = record["message"]
    if not message.get("content"):
        return {**record, "correction": policy.EMPTY_REPLY}
    if tool_uses(message) or agent.verifier is None:
        return record
    verdict = agent.verifier(text_of(message), [*messages, message])
    judged = faults.intercept(faults.VERDICT, run_id, turn, {"ok": verdict.ok, "feedback": verdict.feedback})
    out = {**record, "verdict": {"ok": judged["ok"], "feedback": judged["feedback"]}}
    if "injected" in judged:
        out["injected"] = judged["injected"]
    return out


def call_tool(rt: Runtime, event: Any) -> dict[str, Any]:
    """CallTool: replay or run one tool call of a turn, honouring an approver's decision."""
    item = parse_model(ToolCallItem, event, "tool call input")
    run = load_run(rt, item.run_id)
    agent = rt.resolve_agent(run["agent"])
    use = _tool_use(rt, item)
    ctx = ToolContext(
        run_id=item.run_id,
        turn=item.turn,
        call=item.call,
        idempotency_key=keys.idempotency_key(item.run_id, item.turn, item.call),
    )

    resolution = item.resolution or {}
    if resolution.get("action") == "retry" and resolution.get("happened") is False:
        # A human confirmed that the interrupted at-most-once call did not act: it may run once.
        rt.store.delete(item.run_id, keys.intent_key(item.turn, item.call))

    def execute() -> dict[str, Any]:
        if resolution.get("action") == "skip":  # a human supplied the outcome
            return success(resolution.get("result"))
        if use["name"] == WAIT_FOR and item.wait != "none":
            return _wait_outcome(item)
        args = use["input"]
        decision = item.decision or {}
        if decision.get("decision") == "reject":
            return failure(f"rejected by the approver: {decision.get('reason') or 'no reason given'}", rejected=True)
        if decision.get("decision") == "timeout":
            waiting.expire(rt.store, item.run_id, keys.approval_key(item.turn, item.call))
            return failure("no approver decided before the approval timed out; the call did not run", timed_out=True)
        if decision.get("decision") == "edit":
            args = decision.get("input", args)
        faults.reach(faults.BEFORE_TOOL, item.run_id, item.turn, item.call)
        result = execute_call(agent.tools, rt.store, ctx, use["name"], args)
        faults.reach(faults.AFTER_EFFECT, item.run_id, item.turn, item.call)
        return offload_if_large(result, rt.artifacts, rt.settings.offload_threshold_bytes)

    outcome = run_step(
        rt.store,
        rt.lock,
        run_id=item.run_id,
        sk=keys.tool_step_key(item.turn, item.call),
        kind="tool",
        name=use["name"],
        lock_key=ctx.idempotency_key,
        execute=execute,
    )
    faults.reach(faults.AFTER_TOOL, item.run_id, item.turn, item.call)
    return {
        "run_id": item.run_id,
        "turn": item.turn,
        "call": item.call,
        "tool": use["name"],
        "status": outcome.result["status"],
        "replayed": outcome.replayed,
    }


def _wait_outcome(item: ToolCallItem) -> dict[str, Any]:
    """The result of a ``wait_for`` call: what ended the wait the state machine carried out."""
    if item.wait == "timer":
        return success({"waited": "timer", "until": item.wait_until})
    signal = item.signal or {}
    if signal.get("timed_out"):
        return success({"waited": "event", "event": item.event, "timed_out": True})
    return success({"waited": "event", "event": item.event, "payload": signal.get("payload")})


def wait_for_event(rt: Runtime, event: Any) -> dict[str, Any]:
    """WaitForEvent: park a ``wait_for`` call on its task token, or take a signal that came first."""
    token = _token(event)
    item = parse_model(ToolCallItem, event.get("item"), "wait item")
    use = _tool_use(rt, item)
    if item.wait != "event" or not item.event:
        raise InvalidInputError("item.event: an event wait needs the event name")
    match = use["input"].get("match") or {}
    status = signals.register_waiter(rt.store, rt.step_functions(), item.run_id, item.event, match, token)
    return {"run_id": item.run_id, "turn": item.turn, "call": item.call, "event": item.event, "status": status}


def request_approval(rt: Runtime, event: Any) -> dict[str, Any]:
    """RequestApproval: record a pending approval holding the task token (never returned or logged).

    A re-invocation after the decision was recorded hands the recorded decision to the new token,
    so a retry cannot leave the run waiting for a decision that was already made.
    """
    token = _token(event)
    item = parse_model(ToolCallItem, event.get("item"), "approval item")
    use = _tool_use(rt, item)
    status = waiting.park(
        rt.store,
        rt.step_functions(),
        item.run_id,
        keys.approval_key(item.turn, item.call),
        token,
        {"tool": use["name"], "input": use["input"]},
        reopen=False,
    )
    return {"run_id": item.run_id, "turn": item.turn, "call": item.call, "status": status}


def escalate(rt: Runtime, event: Any) -> dict[str, Any]:
    """Escalate: park a failed step for a human (retry, skip with a result, or abort).

    The input is the failed task's input with the caught error under ``error`` (Catch's
    ResultPath), and the task token.
    """
    token = _token(event)
    failed = event.get("item")
    if not isinstance(failed, dict) or not isinstance(failed.get("error"), dict):
        raise InvalidInputError("escalation input: item.error: the caught error is required")
    error = failed["error"]
    reason = _error_message(error.get("Cause"))
    if "call" in failed:
        item = parse_model(ToolCallItem, failed, "escalated tool call")
        turn, call, task = item.turn, item.call, "CallTool"
        use = _tool_use(rt, item)
        attrs = {"task": task, "tool": use["name"], "input": use["input"]}
    else:
        cursor = parse_model(Cursor, failed, "escalated model turn")
        turn, call, task, attrs = cursor.next_turn, escalations.MODEL_CALL, "ModelTurn", {"task": "ModelTurn"}
    attrs.update(error=str(error.get("Error", "Unknown")), reason=reason)
    status = waiting.park(rt.store, rt.step_functions(), failed["run_id"], keys.escalation_key(turn, call), token, attrs, reopen=True)
    return {"run_id": failed["run_id"], "turn": turn, "task": task, "status": status}


def finish(rt: Runtime, event: Any) -> dict[str, Any]:
    """Finish: the run's final answer (in S3 when large) and a summary for the execution output."""
    cursor = parse_model(Cursor, event, "finish input")
    load_run(rt, cursor.run_id)  # a cursor naming no run is malformed: write no final record for it
    steps = rt.store.steps(cursor.run_id)
    replies = [s for s in steps if s.kind == "model"]
    answer = text_of(replies[-1].result["message"]) if replies else ""
    output: dict[str, Any] = {"run_id": cursor.run_id, "status": "SUCCEEDED", "turns": len(replies), "stop": event.get("stop", "end_turn")}
    if len(answer) > MAX_INLINE_OUTPUT_CHARS:
        output["output_ref"] = rt.artifacts.put(answer.encode("utf-8"), "text/plain")
        output["output"] = answer[:PREVIEW_CHARS]
    else:
        output["output"] = answer
    rt.store.put(cursor.run_id, keys.FINAL_RECORD, {"output": output, "finished_at": time.time()})
    return output


def _token(event: Any) -> str:
    if not isinstance(event, dict) or not isinstance(event.get("token"), str) or not event["token"]:
        raise InvalidInputError("token: a task token string is required")
    return event["token"]


def _error_message(cause: Any) -> str:
    """The message of a Lambda error cause (a JSON string with errorMessage), or the cause itself."""
    try:
        parsed = json.loads(cause)
    except (TypeError, ValueError):
        return str(cause or "")
    return str(parsed.get("errorMessage", cause)) if isinstance(parsed, dict) else str(cause)


# -- reading the log -------------------------------------------------------------------------


def load_run(rt: Runtime, run_id: str) -> dict[str, Any]:
    """The run record, with its JSON fields decoded.

    Raises:
        InvalidInputError: no run with this id.
    """
    record = rt.store.get(run_id, keys.RUN_RECORD)
    if record is None:
        raise InvalidInputError(f"run_id: no run named {run_id!r}")
    record["model"] = json.loads(record["model"])
    return record


def _tool_use(rt: Runtime, item: ToolCallItem) -> dict[str, Any]:
    reply = rt.store.get_step(item.run_id, keys.model_step_key(item.turn))
    if reply is None:
        raise InvalidInputError(f"turn: turn {item.turn} of run {item.run_id} has no recorded model reply")
    uses = tool_uses(reply.result["message"])
    if item.call >= len(uses):
        raise InvalidInputError(f"call: turn {item.turn} has {len(uses)} tool calls, not {item.call + 1}")
    use = uses[item.call]
    if use["name"] != item.tool:
        raise NonDeterminismError(f"call {item.call} of turn {item.turn} is {use['name']}, not {item.tool}")
    return use


def _feedback(record: dict[str, Any]) -> str | None:
    if record.get("correction"):
        return record["correction"]
    verdict = record.get("verdict")
    if verdict and not verdict["ok"]:
        return policy.VERIFIER_PREFIX + verdict["feedback"]
    return None


def _by_turn(steps: list[StepRecord]) -> dict[int, dict[str, Any]]:
    turns: dict[int, dict[str, Any]] = {}
    for step in steps:
        turn = int(step.sk.split("#")[1])
        slot = turns.setdefault(turn, {"model": None, "tools": {}})
        if step.kind == "model":
            slot["model"] = step.result
        else:
            slot["tools"][int(step.sk.split("#")[3])] = step.result
    return turns


def correction_kinds(steps: list[StepRecord], upto_turn: int) -> list[str | None]:
    """For each turn before ``upto_turn``: ``model``, ``semantic`` or None (see ``policy``)."""
    turns = _by_turn(steps)
    out = []
    for turn in range(upto_turn):
        slot = turns.get(turn)
        if not slot or not slot["model"]:
            out.append(None)
            continue
        out.append(policy.correction_kind(slot["model"], [slot["tools"][i] for i in sorted(slot["tools"])]))
    return out


def injected_turns(steps: list[StepRecord], upto_turn: int) -> int:
    """Turns before ``upto_turn`` whose reply or verdict a fault replaced (the script skips them)."""
    return sum(1 for turn, slot in _by_turn(steps).items() if turn < upto_turn and slot["model"] and "injected" in slot["model"])


def completed_turns(steps: list[StepRecord]) -> int:
    """How many leading turns have a model reply with tools and every tool result recorded."""
    turns = _by_turn(steps)
    done = 0
    while done in turns:
        slot = turns[done]
        uses = tool_uses(slot["model"]["message"]) if slot["model"] else []
        if not uses or len(slot["tools"]) < len(uses):
            break
        done += 1
    return done


def transcript(run: dict[str, Any], steps: list[StepRecord], upto_turn: int | None = None) -> list[Message]:
    """Rebuild the message history from the goal and the recorded steps.

    Args:
        run: the run record.
        steps: the recorded steps, in key order.
        upto_turn: stop before this turn (the history a model call of that turn sees).
    """
    messages: list[Message] = [user_text(run["goal"])]
    for turn, slot in sorted(_by_turn(steps).items()):
        if upto_turn is not None and turn >= upto_turn:
            break
        if slot["model"] is None:
            raise NonDeterminismError(f"turn {turn} has tool results but no model reply")
        reply = slot["model"]["message"]
        # Converse refuses an assistant message without content: keep its place with a marker.
        messages.append(reply if reply.get("content") else {**reply, "content": [{"text": "(empty reply)"}]})
        feedback = _feedback(slot["model"])
        if feedback:
            messages.append(user_text(feedback))
        uses = tool_uses(reply)
        if not uses:
            continue
        blocks = []
        for index, use in enumerate(uses):
            result = slot["tools"].get(index)
            if result is None:
                if upto_turn is None:
                    break
                raise NonDeterminismError(f"turn {turn} call {index} has no recorded result")
            blocks.append(tool_result_block(use["toolUseId"], result["content"], is_error=result["status"] == "error"))
        if blocks:
            messages.append({"role": "user", "content": blocks})
    return messages
