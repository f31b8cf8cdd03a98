"""The waits of ``wait_for`` the state machine hands to a task: an event (WaitForEvent, parked on a
task token) and a condition (CheckCondition, one check per backoff interval). A timer is a Wait
state and needs no task."""

from __future__ import annotations

from typing import Any

from longstep.errors import InvalidInputError
from longstep.humans import signals
from longstep.inputs import ToolCallItem, parse_model
from longstep.runtime import Runtime
from longstep.tasks.common import keep_records, load_run, task_token, tool_use


def wait_for_event(rt: Runtime, event: Any) -> dict[str, Any]:
    """WaitForEvent: park a ``wait_for`` call on its task token, or take a signal that came first."""
    token = task_token(event)
    item = parse_model(ToolCallItem, event.get("item"), "wait item")
    use = tool_use(rt, item)
    if item.wait != "event" or not item.event:
        raise InvalidInputError("item.event: an event wait needs the event name")
    match = use["input"].get("match") or {}
    status = signals.register_waiter(rt.store, rt.step_functions(), item.run_id, item.event, match, token)
    if status == signals.WAITING:  # the waiter's record (and the rest of the run) outlives the wait
        keep_records(rt, item.run_id, load_run(rt, item.run_id), float(item.timeout_seconds or 0))
    return {"run_id": item.run_id, "turn": item.turn, "call": item.call, "event": item.event, "status": status}


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
    use = tool_use(rt, item)
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
