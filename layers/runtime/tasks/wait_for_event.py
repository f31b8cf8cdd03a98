"""WaitForEvent: a ``wait_for`` call parked on a task token until its event is signalled (or a
signal that came first taken at once)."""

from __future__ import annotations

from typing import Any

from longstep import events
from longstep.errors import InvalidInputError
from longstep.humans import signals
from longstep.inputs import parse_model, task_token
from longstep.contract.call import CallItem
from longstep.contract.steps import ParkedOutput
from longstep.runtime import Runtime
from longstep.tasks.common import keep_for_wait, load_run, tool_use


def wait_for_event(rt: Runtime, event: Any) -> ParkedOutput:
    """WaitForEvent: park a ``wait_for`` call on its task token, or take a signal that came first."""
    token = task_token(event)
    item = parse_model(CallItem, event.get("item"), "wait item")
    use = tool_use(rt, item)
    if item.wait != "event" or not item.event:
        raise InvalidInputError("item.event: an event wait needs the event name")
    match = use["input"].get("match") or {}
    run = load_run(rt, item.run_id)  # first: the waiter's record gets the run's expiry floor
    status = signals.register_waiter(rt.store, rt.step_functions(), item.run_id, item.event, match, token)
    rt.events.emit(
        item.run_id,
        events.WAIT_STARTED,
        kind="event",
        turn=item.turn,
        call=item.call,
        event=item.event,
        timeout_seconds=item.timeout_seconds,
        status=status,
    )
    if status == signals.WAITING:  # the waiter's record (and the rest of the run) outlives the wait
        keep_for_wait(rt, item.run_id, run, float(item.timeout_seconds or 0))
    return {"run_id": item.run_id, "turn": item.turn, "call": item.call, "event": item.event, "status": status}
