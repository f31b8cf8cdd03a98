"""Runs one tool call according to its effect class.

The caller (a durable step) records the returned result; this module decides what running the
call means when it may be a re-run after a crash.
"""

from __future__ import annotations

from typing import Any

from longstep import clock
from longstep import keys, markers
from longstep.classify import classify_client_error
from longstep.errors import ModelError, OutcomeUnknownError
from longstep.store import CheckpointStore
from longstep.tools.registry import Effect, ProbeAnswer, Tool, ToolContext, ToolRegistry


def success(content: Any) -> dict[str, Any]:
    """A tool result the model sees as a success."""
    return {"status": "success", "content": content}


def failure(message: str, **extra: Any) -> dict[str, Any]:
    """A tool result the model sees as an error it can correct."""
    return {"status": "error", "content": {"error": message, **extra}}


def execute_call(
    registry: ToolRegistry,
    store: CheckpointStore,
    ctx: ToolContext,
    name: str,
    raw_args: Any,
) -> dict[str, Any]:
    """Run the tool ``name`` once with ``raw_args`` and return its result.

    Model mistakes (an unknown tool, arguments that fail the schema) come back as error results
    for the model to correct rather than as exceptions.

    Raises:
        OutcomeUnknownError: an at-most-once call was started before and neither its result nor
            its probe says whether it acted.
    """
    try:
        item = registry.get(name)
        args = item.parse_args(raw_args)
        return success(_run_with_effect(item, store, ctx, args))
    except ModelError as exc:
        return failure(str(exc), kind=type(exc).__name__)


def _run_with_effect(item: Tool, store: CheckpointStore, ctx: ToolContext, args: Any) -> Any:
    from botocore.exceptions import ClientError

    try:
        return _apply_effect(item, store, ctx, args)
    except ClientError as exc:  # an AWS call inside the tool: throttling is retried, denial is not
        raise classify_client_error(exc, model=False) from exc


def _apply_effect(item: Tool, store: CheckpointStore, ctx: ToolContext, args: Any) -> Any:
    if item.effect is Effect.CHECK_THEN_ACT:
        assert item.check is not None
        done = item.check(args, ctx)
        if done is not None:
            return done
    elif item.effect is Effect.AT_MOST_ONCE and not _write_intent(store, ctx, item.name):
        answer = _probe(item, args, ctx)
        if answer.happened is True:
            return answer.result
        if answer.happened is None:
            raise OutcomeUnknownError(
                f"{item.name} (turn {ctx.turn}, call {ctx.call}) was started before and its result was never "
                f"recorded: it may have acted; {answer.reason}; a human must confirm the outcome"
            )
        # The probe is certain it did not act: run it now. The intent marker stays, so a crash
        # during this run is probed again.
    return item.fn(args, ctx)


def _write_intent(store: CheckpointStore, ctx: ToolContext, name: str) -> bool:
    """Mark that an at-most-once call is about to act; a marker without a result means 'unknown'.

    Returns:
        False when a marker was already there: an earlier attempt started this call.
    """
    return markers.put_own(store, ctx.run_id, keys.intent_key(ctx.turn, ctx.call), {"tool": name, "started_at": clock.now()})


def _probe(item: Tool, args: Any, ctx: ToolContext) -> ProbeAnswer:
    """Ask the tool's probe whether the interrupted call acted; any failure of the probe is 'can't tell'."""
    if item.probe is None:
        return ProbeAnswer.unknown("the tool declares no probe")
    try:
        answer = item.probe(args, ctx)
    except Exception as exc:  # noqa: BLE001 - a probe that fails cannot vouch for anything: a human decides
        return ProbeAnswer.unknown(f"its probe failed: {type(exc).__name__}: {exc}")
    if not isinstance(answer, ProbeAnswer):
        return ProbeAnswer.unknown(f"its probe returned {type(answer).__name__}, not a ProbeAnswer")
    from longstep.observability import logs

    logs.logger().info(
        "probe answered for an interrupted at-most-once call",
        extra={"tool": item.name, "idempotency_key": ctx.idempotency_key, "happened": answer.happened},
    )
    if answer.happened is None:
        return ProbeAnswer.unknown(f"its probe cannot tell{': ' + answer.reason if answer.reason else ''}")
    return answer
