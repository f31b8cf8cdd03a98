"""Named points at the step boundaries where a crash can hit, and a seam to inject one there.

In AWS nothing is registered and reaching a point costs a function call. The local stack
registers a hook that kills the invocation at a chosen point, the way a crash or timeout would,
to prove that the run still ends with the same transcript and no second side effect.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

BEFORE_MODEL = "before_model"
AFTER_MODEL = "after_model"  # the model answered; the reply is not recorded yet
AFTER_RECORD = "after_record"  # the reply is recorded; the Lambda has not returned
BEFORE_TOOL = "before_tool"
AFTER_EFFECT = "after_effect"  # the side effect happened; the result is not recorded yet
AFTER_TOOL = "after_tool"  # the result is recorded; the Lambda has not returned

POINTS = (BEFORE_MODEL, AFTER_MODEL, AFTER_RECORD, BEFORE_TOOL, AFTER_EFFECT, AFTER_TOOL)
# A delegated call (longstep.tasks.delegate_to_subagent): the child run is started; the task has not parked
# its answer yet. Apart from POINTS, so that ``--faults random`` plans stay as they were.
CHILD_STARTED = "child_started"
DELEGATE_POINTS = (CHILD_STARTED,)
# A long-running MCP call (longstep.mcp.tasks): a poll of its task answered, its check not yet
# returned (a crash while the task waits). Apart from POINTS too.
MCP_TASK_POLLED = "mcp_task_polled"
MCP_POINTS = (MCP_TASK_POLLED,)

Hook = Callable[[str, str, int, Optional[int]], None]
_hook: Hook | None = None


def set_hook(hook: Hook | None) -> None:
    """Register (or clear, with None) the function called at every fault point."""
    global _hook
    _hook = hook


Interceptor = Callable[[str, str, int, Any], Any]
_interceptor: Interceptor | None = None

# What an interceptor may replace (the local stack's model-error and verifier faults).
MODEL_REPLY = "model_reply"
VERDICT = "verdict"


def set_interceptor(interceptor: Interceptor | None) -> None:
    """Register (or clear) the function that may replace a model reply or a verdict."""
    global _interceptor
    _interceptor = interceptor


def intercept(what: str, run_id: str, turn: int, value: Any) -> Any:
    """``value`` as the interceptor would have it (unchanged when none is registered).

    A replaced value carries ``"injected": <fault>`` so that the scripted model does not count
    the injected turn as one of its own.
    """
    return value if _interceptor is None else _interceptor(what, run_id, turn, value)


def reach(point: str, run_id: str, turn: int, call: int | None = None) -> None:
    """Mark that execution reached ``point`` of ``turn`` (and ``call``); a hook may crash here."""
    if _hook is not None:
        _hook(point, run_id, turn, call)
