"""Runs one tool call according to its effect class.

The caller (a durable step) records the returned result; this module decides what running the
call means when it may be a re-run after a crash.
"""

from __future__ import annotations

from typing import Any

from longstep import clock
from longstep import keys
from longstep.classify import classify_client_error
from longstep.errors import ModelError, OutcomeUnknownError
from longstep.store import AlreadyRecordedError, CheckpointStore
from longstep.tools.registry import Effect, Tool, ToolContext, ToolRegistry


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
        OutcomeUnknownError: an at-most-once call was started before and its outcome is unknown.
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
    elif item.effect is Effect.AT_MOST_ONCE:
        _write_intent(store, ctx, item.name)
    return item.fn(args, ctx)


def _write_intent(store: CheckpointStore, ctx: ToolContext, name: str) -> None:
    """Mark that an at-most-once call is about to act; a marker without a result means 'unknown'."""
    try:
        store.put_once(ctx.run_id, keys.intent_key(ctx.turn, ctx.call), {"tool": name, "started_at": clock.now()})
    except AlreadyRecordedError:
        raise OutcomeUnknownError(
            f"{name} (turn {ctx.turn}, call {ctx.call}) was started before and its result was never "
            "recorded: it may have acted; a human must confirm the outcome"
        ) from None
