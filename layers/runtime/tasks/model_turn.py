"""ModelTurn: replay or make the model call of a turn, and route on the reply (``Route``)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from longstep import clock
from longstep import budget, context, events, faults, keys, memory, policy, routing, steering
from longstep.agent import Agent
from longstep.inputs import parse_model
from longstep.contract.call import Resolution
from longstep.contract.cursor import Cursor, Route
from longstep.contract.run import RunRecord
from longstep.mcp import catalog as mcp_catalog
from longstep.messages import Message, text_of, tool_uses
from longstep.models.base import ModelReply
from longstep.models.stop_reasons import judge_stop
from longstep.contract.steps import TurnOutput
from longstep.runtime import Runtime
from longstep.steps import run_step
from longstep.tasks import inline_tools
from longstep.tasks.common import keep_records, load_run, turn_horizon
from longstep.transcript import correction_kinds, feedback


def model_turn(rt: Runtime, event: Any) -> TurnOutput:
    """ModelTurn: replay or make the model call of turn ``next_turn`` and route on the reply."""
    cursor = parse_model(Cursor, event, "model turn input")
    run = load_run(rt, cursor.run_id)
    agent = rt.resolve_agent(run.agent)
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
    stop_reason = run.steering.stop_reason
    if stop_reason is not None:  # at a step boundary: nothing of this turn has run
        rt.events.emit(cursor.run_id, events.RUN_STOPPED, turn=turn, reason=stop_reason)
        return {**base, "next_turn": turn, "route": Route.DONE, "stop": "stopped", "replayed": False}
    if run.steering.paused:  # parked on the Pause state's token: no compute until resumed
        rt.events.emit(cursor.run_id, events.RUN_PAUSED, turn=turn)
        return {**base, "next_turn": turn, "route": Route.PAUSE, "stop": "paused", "replayed": False}
    if turn >= int(run.max_turns or 0):
        return {**base, "next_turn": turn, "route": Route.DONE, "stop": "max_turns", "replayed": False}
    if _past_deadline(rt, run, cursor.run_id, turn):
        return {**base, "next_turn": turn, "route": Route.DONE, "stop": "deadline", "replayed": False}
    if _over_budget(rt, run, cursor.run_id, turn):  # longstep.budget: asks near a limit, stops at it
        return {**base, "next_turn": turn, "route": Route.DONE, "stop": "stopped", "replayed": False}
    if turn - cursor.generation_start >= int(run.turns_per_execution or rt.settings.turns_per_execution):
        # Hand the run over before this execution's history nears 25,000 events.
        return {**base, "next_turn": turn, "route": Route.CONTINUE, "stop": "continue_as_new", "replayed": False}

    resolution = cursor.resolution or Resolution()
    # Before the model call, which may fail and escalate (again, after a human's retry).
    keep_records(rt, cursor.run_id, run, turn_horizon([], rt.settings.wait_timeouts))
    step = events.step_name(turn)

    def call_model() -> dict[str, Any]:
        rt.events.emit(cursor.run_id, events.STEP_STARTED, step=step, kind="model", turn=turn)
        if resolution.action == "skip":  # a human supplied the reply
            return ModelReply(message={"role": "assistant", "content": [{"text": str(resolution.result)}]}, stop_reason="end_turn").to_record()
        provider = rt.model_for(run.model, agent.model)
        live = _live_context(rt, run, cursor.run_id, turn, provider)
        if resolution.action != "retry":  # a human's retry resets the budgets
            policy.check_budgets(correction_kinds(live.turns, turn), agent.max_model_corrections, agent.max_verifier_failures)
        # Messages the user sent meanwhile: taken here, inside the step, and recorded with its reply.
        texts, upto = steering.pending(rt.store, cursor.run_id, run)
        for text in texts:
            rt.events.emit(cursor.run_id, events.MESSAGE_RECEIVED, turn=turn, text=text)
        messages = steering.add_to_user_turn(live.messages(turn), texts)
        faults.reach(faults.BEFORE_MODEL, cursor.run_id, turn)
        system = agent.system_prompt + memory.prompt_block(run.memories)
        reply = _converse(
            rt, provider, cursor.run_id, step, system=system, messages=messages, tools=mcp_catalog.specs(agent, run), turn=turn - live.injected(turn)
        )
        faults.reach(faults.AFTER_MODEL, cursor.run_id, turn)
        record = faults.intercept(faults.MODEL_REPLY, cursor.run_id, turn, {**reply.to_record(), "at": clock.now(), **_began(cursor.entered_at)})
        if texts:
            record = {**record, "steering": texts, "steering_upto": upto}
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
    if int(outcome.result.get("steering_upto") or 0) > run.steering.inbox_taken:
        steering.taken(rt.store, cursor.run_id, int(outcome.result["steering_upto"]))
        run.took_messages()  # as taken left the record: an inline call is not cancelled by it
    reply = ModelReply.from_record(outcome.result)
    calls = [routing.call_item(agent, run, cursor.run_id, turn, index, use, outcome.result) for index, use in enumerate(tool_uses(reply.message))]
    # No record of the run, those the turn's calls will write included, expires before the
    # longest wait of this turn (and an escalation after it) is over (issues 12 and 24).
    keep_records(rt, cursor.run_id, run, turn_horizon(calls, rt.settings.wait_timeouts))
    record = outcome.result
    corrected = bool(record.get("correction")) or not record.get("verdict", {"ok": True})["ok"]
    _emit_reply(rt, cursor.run_id, step, turn, outcome.replayed, reply, record, calls)
    out = {
        **base,
        "calls": calls,
        "route": Route.TOOLS if calls else (Route.CORRECT if corrected else Route.DONE),
        "stop": reply.stop_reason,
        "replayed": outcome.replayed,
    }
    inlined = inline_tools.inlinable(agent, calls) and run.eval is None  # an eval run's calls go to CallTool (longstep.evals)
    inline_replayed = inline_tools.run_inline(rt, agent, run, calls, tool_uses(reply.message)) if inlined else None
    if inline_replayed is not None:
        # Every call ran here and is recorded (longstep.tasks.inline_tools): on to the next turn.
        return {**out, "route": Route.INLINE, "inline_replayed": inline_replayed}
    if routing.single_call(calls):
        # CallOneTool takes this output as its call item (and a failure of it escalates as a tool
        # call: the item names its call), and hands the cursor on to the next ModelTurn.
        out.update(route=Route.TOOL, call=0, tool=calls[0]["tool"], wait="none", approval=False)
    return out


def _converse(rt: Runtime, provider: Any, run_id: str, step: str, **request: Any) -> ModelReply:
    """The provider's reply; its text goes to the run's event stream as it comes (in one piece
    from a provider that does not stream)."""
    if getattr(provider, "streams_text", False):
        return provider.converse(**request, on_text=lambda text: rt.events.delta(run_id, step, text))
    reply = provider.converse(**request)
    rt.events.delta(run_id, step, text_of(reply.message))
    return reply


def _emit_reply(
    rt: Runtime, run_id: str, step: str, turn: int, replayed: bool, reply: ModelReply, record: dict[str, Any], calls: list[dict[str, Any]]
) -> None:
    """The turn's events: its step finished (or replayed), the feedback it gets, the timers it starts."""
    tools = [call["tool"] for call in calls]
    if replayed:
        rt.events.emit(run_id, events.STEP_REPLAYED, step=step, kind="model", turn=turn, tools=tools, text=text_of(reply.message))
    else:
        rt.events.emit(
            run_id,
            events.STEP_FINISHED,
            step=step,
            kind="model",
            turn=turn,
            stop=reply.stop_reason,
            tools=tools,
            text=text_of(reply.message),
            usage=reply.usage,
        )
        note = feedback(record)
        if note:
            rt.events.emit(run_id, events.MODEL_CORRECTED, turn=turn, feedback=note)
    for call in calls:
        if call.get("wait") == "timer" and not replayed:
            rt.events.emit(run_id, events.WAIT_STARTED, kind="timer", turn=turn, call=call["call"], until=call["wait_until"])


def _past_deadline(rt: Runtime, run: RunRecord, run_id: str, turn: int) -> bool:
    """Whether the run's deadline (if it has one) has passed before this turn's model call.

    A turn whose reply is recorded replays it whatever the time: a resumed run rebuilds the same
    history, and only a turn not yet made is refused.
    """
    deadline = run.deadline
    if deadline is None or clock.now() < deadline:
        return False
    return rt.store.get_step(run_id, keys.model_step_key(turn)) is None


def _ask_listing(rt: Runtime, run: RunRecord) -> Any:
    """The approvals inbox for the run's budget asks (``longstep.humans.budget_asks``); None where
    there is no approvals table (the in-memory store of unit tests)."""
    if getattr(rt.store, "client", None) is None or not rt.settings.approvals.table:
        return None
    from longstep.humans.budget_asks import AskListing
    from longstep.humans.notifications import publisher

    settings = rt.settings.approvals

    def notify(request: dict[str, Any]) -> None:  # the SNS client is made when an ask is, not each turn
        publish = publisher(rt.notifications(), settings)
        assert publish is not None
        publish(request)

    configured = publisher(None, settings) is not None  # a topic or a webhook (the client is not used)
    return AskListing(rt.approvals(), rt.store, run.agent, settings.timeout_seconds, notify if configured else None)


def _over_budget(rt: Runtime, run: RunRecord, run_id: str, turn: int) -> bool:
    """Whether the run is at its budget (or its tenant's) before this turn's new model call: then
    it stops, reason ``budget``. A recorded reply replays whatever the budget says."""
    if not run.budgets.limits and not run.tenant:
        return False
    if rt.store.get_step(run_id, keys.model_step_key(turn)) is not None:
        return False
    # The ask goes to the run's event stream too (``longstep watch``, the run UI).
    over = budget.check(
        rt.store,
        run_id,
        run,
        turn,
        on_ask=lambda question: rt.events.emit(run_id, budget.ASKED_EVENT, turn=turn, question=question),
        listing=_ask_listing(rt, run),
    )
    if over is None:
        return False
    steering.stop(rt.store, run_id, budget.STOP_REASON)
    rt.events.emit(run_id, events.RUN_STOPPED, turn=turn, reason=budget.STOP_REASON, detail=over)
    return True


def _live_context(rt: Runtime, run: RunRecord, run_id: str, turn: int, provider: Any) -> context.LiveContext:
    """The bounded context of ``turn``: snapshot every ``snapshot_every`` turns, summarize past the budget."""
    settings = rt.settings
    live = context.load(rt.store, rt.artifacts, run_id, run, turn, settings.snapshot_every)
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


def _began(raw: str | None) -> dict[str, float]:
    """``began_at``: when the state machine entered this turn's ModelTurn state (the cursor's
    ``entered_at``, its ``$$.State.EnteredTime``: the service's clock, the same for every retry of
    the state), as epoch seconds; nothing when the definition does not pass it."""
    if raw is None:
        return {}
    try:
        entered = dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return {}
    return {"began_at": (entered if entered.tzinfo else entered.replace(tzinfo=dt.timezone.utc)).timestamp()}


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
