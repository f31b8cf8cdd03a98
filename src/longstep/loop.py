"""The agent loop, one function per state machine task: start, model turn, tool call, finish.

Each function takes the task's small JSON input (a cursor into the checkpoint log), does one
durable step, and returns the next cursor. The transcript never travels through Step Functions.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from longstep import clock
from longstep import approvals, clients, context, executions, memory, escalations, faults, keys, policy, signals, waiting
from longstep.transcript import correction_kinds
from longstep.agent import Agent
from longstep.artifacts import PREVIEW_CHARS, offload_if_large
from longstep.errors import InvalidInputError, NonDeterminismError, RunConflictError
from longstep.inputs import Cursor, StartInput, ToolCallItem, parse_model
from longstep.messages import Message, text_of, tool_uses
from longstep.models.base import ModelReply
from longstep.runtime import Runtime
from longstep.steps import run_step
from longstep.store import AlreadyRecordedError
from longstep.tools.builtins import READ_ARTIFACT, WAIT_FOR, ReadArtifactArgs, WaitForArgs
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
    rt.resolve_agent(start.agent)  # an unknown agent fails here, before anything is written
    record = {
        "agent": start.agent,
        "goal": start.goal,
        "model": start.model.model_dump(),
        "max_turns": start.max_turns or rt.settings.max_turns,
        "turns_per_execution": start.turns_per_execution or rt.settings.turns_per_execution,
        "memory_namespace": memory.namespace(start.agent, start.user),
        # Read once: every model call of the run, and every replay, sees the same memories.
        "memories": _load_memories(rt, memory.namespace(start.agent, start.user)),
        "created_at": clock.now(),
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
    next_turn = context.resume_point(rt.store, rt.artifacts, start.run_id) if resumed else 0
    return {
        "run_id": start.run_id,
        "next_turn": next_turn,
        "resumed": resumed,
        "resolution": None,
        "generation": start.generation,
        "generation_start": next_turn,
    }


def model_turn(rt: Runtime, event: Any) -> dict[str, Any]:
    """ModelTurn: replay or make the model call of turn ``next_turn`` and route on the reply."""
    cursor = parse_model(Cursor, event, "model turn input")
    run = load_run(rt, cursor.run_id)
    agent = rt.resolve_agent(run["agent"])
    turn = cursor.next_turn
    base = {
        "run_id": cursor.run_id,
        "turn": turn,
        "next_turn": turn + 1,
        "calls": [],
        "resolution": None,
        "generation": cursor.generation,
        "generation_start": cursor.generation_start,
    }
    if turn >= int(run["max_turns"]):
        return {**base, "next_turn": turn, "route": "done", "stop": "max_turns", "replayed": False}
    if turn - cursor.generation_start >= int(run.get("turns_per_execution") or rt.settings.turns_per_execution):
        # Hand the run over before this execution's history nears 25,000 events.
        return {**base, "next_turn": turn, "route": "continue", "stop": "continue_as_new", "replayed": False}

    resolution = cursor.resolution or {}

    def call_model() -> dict[str, Any]:
        if resolution.get("action") == "skip":  # a human supplied the reply
            return ModelReply(message={"role": "assistant", "content": [{"text": str(resolution.get("result"))}]}, stop_reason="end_turn").to_record()
        provider = rt.model_for(run["model"])
        live = _live_context(rt, run, cursor.run_id, turn, provider)
        if resolution.get("action") != "retry":  # a human's retry resets the budgets
            policy.check_budgets(correction_kinds(live.turns, turn), agent.max_model_corrections, agent.max_verifier_failures)
        messages = live.messages(turn)
        faults.reach(faults.BEFORE_MODEL, cursor.run_id, turn)
        system = agent.system_prompt + memory.prompt_block(run.get("memories") or [])
        reply = provider.converse(system=system, messages=messages, tools=agent.tools.specs(), turn=turn - live.injected(turn))
        faults.reach(faults.AFTER_MODEL, cursor.run_id, turn)
        record = faults.intercept(faults.MODEL_REPLY, cursor.run_id, turn, {**reply.to_record(), "at": clock.now()})
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


def _live_context(rt: Runtime, run: dict[str, Any], run_id: str, turn: int, provider: Any) -> context.LiveContext:
    """The bounded context of ``turn``: snapshot every ``snapshot_every`` turns, summarize past the budget."""
    settings = rt.settings
    live = context.load(rt.store, rt.artifacts, run_id, run["goal"], turn)
    if turn and turn % settings.snapshot_every == 0:
        context.write_snapshot(rt.store, rt.artifacts, run_id, live)
    over = context.estimate_tokens(live.messages(turn)) > settings.context_budget_tokens
    upto = turn - settings.keep_recent_turns
    if over and upto > live.start:
        previous = live.summary["text"] if live.summary else None
        text = provider.summarize(previous=previous, outline=context.outline(live.turns, live.start, upto), turn=turn)
        live.summarize_upto(context.record_summary(rt.store, run_id, turn, {"upto_turn": upto, "text": text}))
        context.remember(rt.store, run_id, live)
    return live


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
    if args.condition is not None:
        return {"wait": "condition", "condition": args.condition, "timeout_seconds": args.timeout_seconds, "check_every": args.check_every_seconds}
    # Relative to when the reply was recorded, so a replay waits for the same instant.
    return {"wait": "timer", "wait_until": args.timer_until(dt.datetime.fromtimestamp(record.get("at", clock.now()), dt.timezone.utc))}


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
        if use["name"] == READ_ARTIFACT:
            return _read_artifact(rt, use["input"])
        if use["name"] in (memory.REMEMBER, memory.RECALL):
            return _use_memory(rt, run, ctx, use["name"], use["input"])
        args = use["input"]
        decision = item.decision or {}
        if decision.get("decision") == "reject":
            return failure(f"rejected by the approver: {decision.get('reason') or 'no reason given'}", rejected=True)
        if decision.get("decision") == "timeout":
            approvals.expire_call(approvals.table_from_env(rt.store.client)[0], rt.store, item.run_id, item.turn, item.call)
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


def continue_as_new(rt: Runtime, event: Any) -> dict[str, Any]:
    """ContinueAsNew: start the run's next execution (generation + 1), which resumes from the log.

    The execution name is deterministic (``<run_id>--g<generation>``): a retried invocation
    starts nothing new (Step Functions treats the same name and input as the same execution).
    """
    if not isinstance(event, dict) or not isinstance(event.get("state_machine_arn"), str):
        raise InvalidInputError("state_machine_arn: the state machine's ARN is required")
    if not isinstance(event.get("execution_name"), str):
        raise InvalidInputError("execution_name: the current execution's name is required")
    cursor = parse_model(Cursor, event.get("cursor"), "continue-as-new cursor")
    run = load_run(rt, cursor.run_id)
    generation = cursor.generation + 1
    payload = {
        "run_id": cursor.run_id,
        "goal": run["goal"],
        "agent": run["agent"],
        "max_turns": int(run["max_turns"]),
        "model": run["model"],
        "turns_per_execution": int(run.get("turns_per_execution") or rt.settings.turns_per_execution),
        "generation": generation,
    }
    name = executions.generation_name(executions.first_name(event["execution_name"]), generation)
    sfn = rt.step_functions()
    try:
        arn = sfn.start_execution(stateMachineArn=event["state_machine_arn"], name=name, input=json.dumps(payload))["executionArn"]
    except sfn.exceptions.ExecutionAlreadyExists:  # started by an earlier attempt of this task
        arn = executions.execution_arn(event["state_machine_arn"], name)
    return {"run_id": cursor.run_id, "continued_as": arn, "generation": generation, "next_turn": cursor.next_turn}


def _memory_store(rt: Runtime) -> memory.MemoryStore | None:
    table = rt.settings.memory_table
    return memory.MemoryStore(table, rt.store.client) if table else None


def _load_memories(rt: Runtime, space: str) -> list[dict[str, str]]:
    store = _memory_store(rt)
    return [] if store is None else [{"key": m["key"], "value": m["value"]} for m in store.all(space)[: memory.PROMPT_MEMORIES]]


def _use_memory(rt: Runtime, run: dict[str, Any], ctx: ToolContext, name: str, raw: Any) -> dict[str, Any]:
    """``remember`` and ``recall`` on the run's memory namespace."""
    store = _memory_store(rt)
    if store is None:
        return failure("long-term memory is not configured for this deployment", kind="ToolInputError")
    model = memory.RememberArgs if name == memory.REMEMBER else memory.RecallArgs
    try:
        args = model.model_validate(raw)
    except ValueError as exc:
        return failure(f"arguments of {name}: {exc}", kind="ToolArgumentsError")
    space = run.get("memory_namespace") or run["agent"]
    if isinstance(args, memory.RememberArgs):
        return success(store.put(space, args.key, args.value, ctx.run_id))
    return success({"memories": store.recall(space, args.query, args.limit)})


def _read_artifact(rt: Runtime, raw: Any) -> dict[str, Any]:
    """A page of an offloaded output (artifacts are content-addressed: a page never changes)."""
    try:
        args = ReadArtifactArgs.model_validate(raw)
    except ValueError as exc:
        return failure(f"arguments of {READ_ARTIFACT}: {exc}", kind="ToolArgumentsError")
    try:
        text = rt.artifacts.get(args.ref).decode("utf-8", errors="replace")
    except rt.artifacts.client.exceptions.NoSuchKey:
        return failure(f"ref: no artifact {args.ref}", kind="ToolInputError")
    page = text[args.offset : args.offset + args.length]
    return success({"ref": args.ref, "offset": args.offset, "length": len(page), "total_chars": len(text), "text": page})


def check_condition(rt: Runtime, event: Any) -> dict[str, Any]:
    """CheckCondition: one check of a ``wait_for`` condition, and the next backoff interval.

    Time is counted from the intervals the state machine waited (not the wall clock), so the
    timeout holds under the local clock too; each interval doubles, capped at an hour.
    """
    item = parse_model(ToolCallItem, event, "condition check input")
    if item.wait != "condition" or not item.condition:
        raise InvalidInputError("condition: a condition wait needs the condition's name")
    run = load_run(rt, item.run_id)
    agent = rt.resolve_agent(run["agent"])
    use = _tool_use(rt, item)
    previous = item.check or {}
    waited = int(previous.get("waited", 0)) + int(previous.get("next_wait", 0))
    check = agent.conditions.get(item.condition)
    if check is None:
        return {"done": True, "met": False, "waited": waited, "error": f"condition: unknown condition {item.condition!r}; known: {', '.join(sorted(agent.conditions)) or 'none'}"}
    result = check(use["input"].get("args") or {})
    if result is not None:
        return {"done": True, "met": True, "result": result, "waited": waited}
    timeout = int(item.timeout_seconds or 0)
    if waited >= timeout:
        return {"done": True, "met": False, "timed_out": True, "waited": waited}
    interval = min(int(previous.get("next_wait", 0)) * 2 or int(item.check_every or 30), 3600, max(timeout - waited, 1))
    return {"done": False, "met": False, "waited": waited, "next_wait": interval}


def _wait_outcome(item: ToolCallItem) -> dict[str, Any]:
    """The result of a ``wait_for`` call: what ended the wait the state machine carried out."""
    if item.wait == "timer":
        return success({"waited": "timer", "until": item.wait_until})
    if item.wait == "condition":
        check = item.check or {}
        if check.get("error"):
            return failure(check["error"], kind="ToolInputError")
        outcome = {"waited": "condition", "condition": item.condition, "met": bool(check.get("met")), "waited_seconds": check.get("waited", 0)}
        if check.get("met"):
            outcome["result"] = check.get("result")
        if check.get("timed_out"):
            outcome["timed_out"] = True
        return success(outcome)
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
    run = load_run(rt, item.run_id)
    table, settings = approvals.table_from_env(rt.store.client)
    outcome = approvals.request(
        table,
        rt.store,
        rt.step_functions(),
        run_id=item.run_id,
        turn=item.turn,
        call=item.call,
        tool=use["name"],
        tool_input=use["input"],
        agent=run["agent"],
        token=token,
        timeout_seconds=settings.timeout_seconds,
        notify=approvals.publisher(clients.client("sns"), settings),
    )
    return {"run_id": item.run_id, "turn": item.turn, "call": item.call, **outcome}


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
    status = waiting.park(rt.store, failed["run_id"], keys.escalation_key(turn, call), token, attrs)
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
    rt.store.put(cursor.run_id, keys.FINAL_RECORD, {"output": output, "finished_at": clock.now()})
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
    record["memories"] = json.loads(record["memories"]) if record.get("memories") else []
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











