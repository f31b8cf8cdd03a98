"""ModelTurn: replay or make the model call of a turn, and route on the reply (``Route``)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from longstep import clock
from longstep import context, faults, keys, memory, policy, subagents
from longstep.agent import Agent
from longstep.inputs import Cursor, Route, parse_model
from longstep.messages import Message, text_of, tool_uses
from longstep.models.base import ModelReply
from longstep.models.stop_reasons import judge_stop
from longstep.runtime import Runtime
from longstep.steps import run_step
from longstep.tasks.common import keep_records, load_run, turn_horizon
from longstep.tools.builtins import WAIT_FOR, WaitForArgs
from longstep.transcript import correction_kinds


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
        return {**base, "next_turn": turn, "route": Route.DONE, "stop": "max_turns", "replayed": False}
    if _past_deadline(rt, run, cursor.run_id, turn):
        return {**base, "next_turn": turn, "route": Route.DONE, "stop": "deadline", "replayed": False}
    if turn - cursor.generation_start >= int(run.get("turns_per_execution") or rt.settings.turns_per_execution):
        # Hand the run over before this execution's history nears 25,000 events.
        return {**base, "next_turn": turn, "route": Route.CONTINUE, "stop": "continue_as_new", "replayed": False}

    resolution = cursor.resolution or {}
    # Before the model call, which may fail and escalate (again, after a human's retry).
    keep_records(rt, cursor.run_id, run, turn_horizon([], rt.settings.wait_timeouts))

    def call_model() -> dict[str, Any]:
        if resolution.get("action") == "skip":  # a human supplied the reply
            return ModelReply(message={"role": "assistant", "content": [{"text": str(resolution.get("result"))}]}, stop_reason="end_turn").to_record()
        provider = rt.model_for(run["model"], agent.model)
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
                **(subagents.routing(agent.subagents, use) or _wait_routing(use, outcome.result, agent.events)),
            }
        )
    # No record of the run, those the turn's calls will write included, expires before the
    # longest wait of this turn (and an escalation after it) is over (issues 12 and 24).
    keep_records(rt, cursor.run_id, run, turn_horizon(calls, rt.settings.wait_timeouts))
    record = outcome.result
    corrected = bool(record.get("correction")) or not record.get("verdict", {"ok": True})["ok"]
    return {
        **base,
        "calls": calls,
        "route": Route.TOOLS if calls else (Route.CORRECT if corrected else Route.DONE),
        "stop": reply.stop_reason,
        "replayed": outcome.replayed,
    }


def _past_deadline(rt: Runtime, run: dict[str, Any], run_id: str, turn: int) -> bool:
    """Whether the run's deadline (if it has one) has passed before this turn's model call.

    A turn whose reply is recorded replays it whatever the time: a resumed run rebuilds the same
    history, and only a turn not yet made is refused.
    """
    deadline = run.get("deadline")
    if deadline is None or clock.now() < float(deadline):
        return False
    return rt.store.get_step(run_id, keys.model_step_key(turn)) is None


def _live_context(rt: Runtime, run: dict[str, Any], run_id: str, turn: int, provider: Any) -> context.LiveContext:
    """The bounded context of ``turn``: snapshot every ``snapshot_every`` turns, summarize past the budget."""
    settings = rt.settings
    live = context.load(rt.store, rt.artifacts, run_id, run, turn)
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


def _wait_routing(use: dict[str, Any], record: dict[str, Any], events: tuple[str, ...] | None = None) -> dict[str, Any]:
    """How the state machine carries out a ``wait_for`` call: a Wait state or a task token.

    Invalid arguments get no routing, nor does an event the agent does not declare (``events``):
    CallTool then tells the model why.
    """
    if use["name"] != WAIT_FOR:
        return {"wait": "none"}
    try:
        args = WaitForArgs.model_validate(use["input"])
    except ValueError:
        return {"wait": "none"}
    if args.event is not None and events is not None and args.event not in events:
        return {"wait": "none"}  # no signal could reach it: ``signals.send`` refuses them
    if args.event is not None:
        return {"wait": "event", "event": args.event, "timeout_seconds": args.timeout_seconds}
    if args.condition is not None:
        return {"wait": "condition", "condition": args.condition, "timeout_seconds": args.timeout_seconds, "check_every": args.check_every_seconds}
    # Relative to when the reply was recorded, so a replay waits for the same instant.
    return {"wait": "timer", "wait_until": args.timer_until(dt.datetime.fromtimestamp(record.get("at", clock.now()), dt.timezone.utc))}


def _judge(agent: Agent, record: dict[str, Any], messages: list[Message], run_id: str, turn: int) -> dict[str, Any]:
    """Add the feedback a reply needs before it is recorded: an empty reply, a rejected answer."""
    # Stop reasons (longstep.models.stop_reasons): a cut-off, filtered, refused or malformed reply
    # is never a final answer; it is corrected (within the budget) or escalated (raises).
    stopped = judge_stop(record)
    if stopped is not None:
        return stopped
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
