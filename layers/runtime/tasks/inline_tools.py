"""Read tools run inside ModelTurn's invocation (``Agent.inline_read_tools``, docs/cost.md).

A turn whose calls are all read tools the agent inlines needs no CallTool task: ModelTurn runs
each call as the same durable step CallTool would (``step#<turn>#tool#<call>``, claimed with the
same record lease, recorded with the same result and events), so a crash after a call was
recorded replays its record, and the next ModelTurn's context is the same either way. The turn
then goes from Route back to ModelTurn: two state transitions and one Lambda invocation fewer.

Only the agent's own ModelTurn function inlines: the stack gives it the agent's read grants and
names the tools it may run in ``ENV_INLINE_TOOLS``; the shared ModelTurn has neither and never
inlines. Inlining is an optimization, never a second policy: a call left over (too little of the
invocation's time left, ``ENV_INLINE_RESERVE_SECONDS``) or one that fails is handed to CallTool
as if no call had run inline, with CallTool's own retries and escalation; what did run inline
is recorded, and CallTool replays it.
"""

from __future__ import annotations

import json
from typing import Any

from longstep import environment, steering
from longstep.agent import Agent
from longstep.contract.call import CallItem
from longstep.runtime import Runtime
from longstep.settings import ENV_INLINE_RESERVE_SECONDS, ENV_INLINE_TOOLS
from longstep.tasks.call_tool import record_call, run_tool, tool_context
from longstep.tools.executor import failure

# The tools this ModelTurn function may run inline (a JSON list, written by the stack for an agent's
# own ModelTurn only) and the time an inline call needs left in the invocation before it starts
# (the CallTool function's timeout: an inline call is never given less time than CallTool gives it).
DEFAULT_RESERVE_SECONDS = 120


def inline_tools_variable(names: frozenset[str] | tuple[str, ...]) -> str:
    """``ENV_INLINE_TOOLS``'s value for these tool names."""
    return json.dumps(sorted(names))


def deployed_inline_tools() -> frozenset[str]:
    """The tools this function was deployed to run inline (none: not an agent's own ModelTurn)."""
    raw = environment.get(ENV_INLINE_TOOLS).strip()
    return frozenset(json.loads(raw)) if raw else frozenset()


def reserve_seconds() -> float:
    """How much of the invocation's time an inline call needs left before it starts."""
    raw = environment.get(ENV_INLINE_RESERVE_SECONDS).strip()
    return float(raw) if raw else float(DEFAULT_RESERVE_SECONDS)


def inlinable(agent: Agent, calls: list[dict[str, Any]]) -> bool:
    """Whether every call of the turn is a read tool this function may run inline."""
    if not calls:
        return False
    allowed = agent.inline_tools() & deployed_inline_tools()
    return all(call["tool"] in allowed and not call["approval"] and call.get("wait") == "none" and set(call) <= _PLAIN for call in calls)


# A plain call's routing fields (``model_turn``): anything more is a wait or a route of its own.
_PLAIN = {"run_id", "turn", "call", "tool", "approval", "wait"}


def run_inline(rt: Runtime, agent: Agent, run: dict[str, Any], calls: list[dict[str, Any]], uses: list[dict[str, Any]]) -> int | None:
    """Run the turn's calls here, in order, each as its durable step.

    Returns:
        When every call is recorded, how many of them were replayed from their records; None when
        one was left to CallTool (too little time left, or it failed: its claim is released, so
        CallTool claims it at once).
    """
    replayed = 0
    for call, use in zip(calls, uses):
        if _remaining_seconds(rt) < reserve_seconds():
            return None
        item = CallItem.model_validate(call)
        ctx = tool_context(rt, run, item)

        def execute(use: dict[str, Any] = use, ctx: Any = ctx) -> dict[str, Any]:
            from longstep import events

            step = events.step_name(ctx.turn, ctx.call)
            rt.events.emit(ctx.run_id, events.STEP_STARTED, step=step, kind="tool", turn=ctx.turn, call=ctx.call, tool=use["name"], args=use["input"])
            cancelled = steering.cancelled(run)
            if cancelled is not None:  # a stop or an interrupt came before the call ran
                return failure(cancelled, cancelled=True)
            return run_tool(rt, agent, ctx, use["name"], use["input"])

        try:
            replayed += record_call(rt, item, use, execute).replayed
        except Exception as exc:  # noqa: BLE001 - CallTool runs it again, with its retries and escalation
            from longstep.observability import logs

            logs.logger().info(
                "inline call left to CallTool", extra={"turn": item.turn, "call": item.call, "tool": use["name"], "error": type(exc).__name__}
            )
            return None
    return replayed


def _remaining_seconds(rt: Runtime) -> float:
    remaining = getattr(getattr(rt.lock, "lambda_context", None), "get_remaining_time_in_millis", None)
    return remaining() / 1000 if callable(remaining) else float("inf")
