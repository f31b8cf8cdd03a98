"""CallTool: replay or run one tool call of a turn, honouring an approver's or a human's answer.

Every tool, the built-in ones included (``longstep.tools.builtins``), runs through the agent's
registry; the built-ins reach the runtime's services through ``ToolContext.services``.
"""

from __future__ import annotations

from typing import Any, Callable

from longstep import clock, evals, events, faults, keys, steering
from longstep.artifacts import offload_if_large
from longstep.errors import InvalidInputError, SignalTakenError
from longstep.humans import requests, signals
from longstep.humans.table import arguments_digest
from longstep.inputs import parse_model
from longstep.contract.call import CallItem, Decision, Resolution
from longstep.contract.cursor import Cursor
from longstep.contract.run import RunRecord
from longstep.contract.steps import CallOutput
from longstep.runtime import Runtime
from longstep.steps import StepOutcome, run_step
from longstep.tasks.common import load_run_and_call
from longstep.tools.executor import execute_call, failure, success
from longstep.tools.registry import ToolContext, ToolServices


def call_tool(rt: Runtime, event: Any) -> CallOutput:
    """CallTool: replay or run one tool call of a turn, honouring an approver's decision.

    A human's escalation answer comes first (``skip`` records the result they gave), then an
    approver's decision (reject, timeout, edit), then the tool runs through the registry.
    """
    item = parse_model(CallItem, event, "tool call input")
    run, use = load_run_and_call(rt, item)
    agent = rt.resolve_agent(run.agent)
    ctx = tool_context(rt, run, item)

    # The signal this call took is consumed by its wait, whatever its sender managed; one another
    # wait consumed first parks this one again (unless this call's result is already recorded).
    if item.wait == "event" and item.signal is not None and not signals.received(rt.store, item.run_id, item.signal):
        if rt.store.get_step(item.run_id, keys.tool_step_key(item.turn, item.call)) is None:
            raise SignalTakenError(
                f"turn {item.turn} call {item.call}: the signal it was handed went to another wait on {item.event!r}; waiting again"
            )
    resolution = item.resolution or Resolution()
    if resolution.retry_without_effect:
        # A human confirmed that the interrupted at-most-once call did not act: it may run once.
        rt.store.delete(item.run_id, keys.intent_key(item.turn, item.call))

    step = events.step_name(item.turn, item.call)
    decision = item.decision or Decision()

    def execute() -> dict[str, Any]:
        rt.events.emit(item.run_id, events.STEP_STARTED, step=step, kind="tool", turn=item.turn, call=item.call, tool=use["name"], args=use["input"])
        if decision.decision:
            rt.events.emit(item.run_id, events.APPROVAL_DECIDED, turn=item.turn, call=item.call, tool=use["name"], **decision.event_fields())
        # The decision reached the run, whatever its sender heard (one conditional write; the
        # in-memory store of unit tests has no approvals table).
        if decision.decision in ("approve", "reject", "edit") and getattr(rt.store, "client", None) is not None:
            requests.decision_reached(rt.approvals(), rt.store, item.run_id, item.turn, item.call, decision.model_dump(exclude_unset=True))
        if resolution.action == "skip":  # a human supplied the outcome
            return success(resolution.result)
        cancelled = steering.cancelled(run)
        if cancelled is not None:  # a stop or an interrupt came before the call ran
            return failure(cancelled, cancelled=True)
        args = use["input"]
        if run.eval is not None:  # an eval run: answered from the record, or withheld (longstep.evals)
            return evals.answer(rt.artifacts, agent, run.eval, use["name"], args, lambda live: run_tool(rt, agent, ctx, use["name"], live))
        if decision.decision == "reject":
            return failure(f"rejected by the approver: {decision.reason or 'no reason given'}", rejected=True)
        if decision.decision == "timeout":
            requests.expire_call(rt.approvals(), rt.store, item.run_id, item.turn, item.call)
            return failure("no approver decided before the approval timed out; the call did not run", timed_out=True)
        if decision.decision == "edit" and "input" in decision.model_fields_set:
            args = decision.input
        if decision.args_digest is not None and arguments_digest(args) != decision.args_digest:
            # The decision was made on other arguments (a changed call, a tampered answer): an
            # approval never runs arguments nobody approved.
            return failure("the approval was given for other arguments than this call's; the call did not run", rejected=True)
        return run_tool(rt, agent, ctx, use["name"], args)

    outcome = record_call(rt, item, use, execute)
    out = {
        "run_id": item.run_id,
        "turn": item.turn,
        "call": item.call,
        "tool": use["name"],
        "status": outcome.result["status"],
        "replayed": outcome.replayed,
    }
    if isinstance(event, dict) and "next_turn" in event:
        # CallOneTool (the turn's one call, run without the Map): its ResultSelector hands these
        # on as the next ModelTurn's cursor.
        cursor = parse_model(Cursor, event, "tool call input")
        out.update(next_turn=cursor.next_turn, resolution=None, generation=cursor.generation, generation_start=cursor.generation_start)
    return out


def call_tool_eval(rt: Runtime, event: Any) -> CallOutput:
    """CallTool in an eval run's function (``CallToolEval-<agent>``, whose role holds only the
    agent's reads): ``call_tool`` for an eval run's call, which it answers without acting
    (``longstep.evals``).

    Raises:
        InvalidInputError: the call is not an eval run's (BindAgent binds this function for eval
            runs only; another run's call would fail on its first write).
    """
    item = parse_model(CallItem, event, "tool call input")
    if load_run_and_call(rt, item)[0].eval is None:
        raise InvalidInputError(f"run_id: run {item.run_id} is not an eval run; CallToolEval answers eval runs' calls only")
    return call_tool(rt, event)


def tool_context(rt: Runtime, run: RunRecord, item: CallItem) -> ToolContext:
    """What the tool of ``item`` is told of its call (CallTool's and an inline call's alike)."""
    return ToolContext(
        run_id=item.run_id,
        turn=item.turn,
        call=item.call,
        idempotency_key=keys.idempotency_key(item.run_id, item.turn, item.call),
        services=ToolServices(rt.artifacts, rt.memory(), run.memory_namespace),
        item=item,
    )


def run_tool(rt: Runtime, agent: Any, ctx: ToolContext, name: str, args: Any) -> dict[str, Any]:
    """Run the tool ``name`` through the agent's registry, between its fault points; a large result
    goes to S3 (the step's body: called inside ``record_call``'s step only)."""
    faults.reach(faults.BEFORE_TOOL, ctx.run_id, ctx.turn, ctx.call)
    result = execute_call(agent.tools, rt.store, ctx, name, args)
    faults.reach(faults.AFTER_EFFECT, ctx.run_id, ctx.turn, ctx.call)
    return offload_if_large(result, rt.artifacts, rt.settings.offload_threshold_bytes)


def record_call(rt: Runtime, item: CallItem, use: dict[str, Any], execute: Callable[[], dict[str, Any]]) -> StepOutcome:
    """The call's durable step (``step#<turn>#tool#<call>``): replayed if recorded, else ``execute``
    run and recorded under the step's claim; then its events."""
    outcome = run_step(
        rt.store,
        rt.lock,
        run_id=item.run_id,
        sk=keys.tool_step_key(item.turn, item.call),
        kind="tool",
        name=use["name"],
        lock_key=keys.idempotency_key(item.run_id, item.turn, item.call),
        execute=execute,
    )
    faults.reach(faults.AFTER_TOOL, item.run_id, item.turn, item.call)
    _emit_result(rt, item, events.step_name(item.turn, item.call), use, outcome.result, outcome.replayed)
    return outcome


def _emit_result(rt: Runtime, item: CallItem, step: str, use: dict[str, Any], result: dict[str, Any], replayed: bool) -> None:
    """The call's events: its step finished (or replayed), and the end of a ``wait_for``'s wait."""
    # A replayed step says its arguments too: its recording attempt may have ended before telling.
    rt.events.emit(
        item.run_id,
        events.STEP_REPLAYED if replayed else events.STEP_FINISHED,
        step=step,
        kind="tool",
        turn=item.turn,
        call=item.call,
        tool=use["name"],
        args=use["input"] if replayed else None,
        status=result.get("status"),
        result=result.get("content"),
    )
    if replayed:
        return
    if item.wait not in (None, "none"):
        reply = rt.store.get_step(item.run_id, keys.model_step_key(item.turn))
        started = float((reply.result if reply else {}).get("at") or clock.now())
        rt.events.emit(item.run_id, events.WAIT_ENDED, kind=item.wait, turn=item.turn, call=item.call, waited_seconds=round(clock.now() - started, 3))
