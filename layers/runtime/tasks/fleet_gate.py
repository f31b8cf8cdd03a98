"""The fleet's tasks: a concurrency slot taken after Init and given back at the end, and the draw
from the model's shared rate limit before each model turn (``longstep.concurrency``,
``longstep.rate_limit``; the states: ``longstep_kit.constructs.loop_fleet``).

One function serves them all, told apart by ``op``; it also takes the EventBridge event of an
execution that ended without reaching Finish (failed, timed out, aborted), which gives back what
that execution held (and closes its pending budget ask):
https://docs.aws.amazon.com/eventbridge/latest/ref/events-ref-states.html.
"""

from __future__ import annotations

import json
from typing import Any

from longstep import keys
from longstep.concurrency import Slots, key_of
from longstep.errors import InvalidInputError
from longstep.fleet import FleetSettings
from longstep.rate_limit import Buckets, correction
from longstep.contract.steps import FleetOutput
from longstep.runtime import Runtime
from longstep.inputs import task_token
from longstep.tasks.common import load_run
from longstep.tasks.finish import close_budget_asks

STATUS_CHANGE = "Step Functions Execution Status Change"
ENDED = ("FAILED", "TIMED_OUT", "ABORTED")


def slots(rt: Runtime, fleet: FleetSettings) -> Slots:
    """The concurrency slots of this deployment's key."""
    if fleet.concurrency is None:
        raise InvalidInputError("fleet: this deployment has no concurrency key (fleet.concurrency)")
    return Slots(rt.store.client, rt.store.table_name, rt.step_functions(), fleet.concurrency.limit)


def fleet_gate(rt: Runtime, event: Any) -> FleetOutput:
    """AcquireSlot, ReleaseSlot, DrawRate, or an ended execution's event.

    Raises:
        InvalidInputError: the event is none of them, or names no run.
    """
    if not isinstance(event, dict):
        raise InvalidInputError("event: an object is required")
    fleet = FleetSettings.from_env()
    if event.get("detail-type") == STATUS_CHANGE:
        return _execution_ended(rt, fleet, event.get("detail") or {})
    run_id = event.get("run_id")
    if not isinstance(run_id, str) or not run_id:
        raise InvalidInputError("run_id: the run's id is required")
    op = event.get("op")
    if op == "acquire":
        run = load_run(rt, run_id)
        if run.parent:
            # A subagent's run is its parent's work, under the parent's slot: were it queued
            # behind parents that each wait for a child, the key would never move.
            rt.step_functions().send_task_success(taskToken=task_token(event), output=json.dumps({"slot": None, "run_id": run_id}))
            return {"run_id": run_id, "status": "child"}
        key = key_of(run, fleet.concurrency.key if fleet.concurrency else "")
        gate = slots(rt, fleet)
        status = gate.acquire(key, run_id, str(event.get("execution") or ""), task_token(event))
        return {"run_id": run_id, "key": key, "status": status, "woke": gate.woke}
    if op == "release":
        key = key_of(load_run(rt, run_id), fleet.concurrency.key if fleet.concurrency else "")
        gate = slots(rt, fleet)
        released = gate.release(key, run_id, event.get("execution"))
        return {"run_id": run_id, "key": key, "released": released, "woke": gate.woke}
    if op == "draw":
        model_id = load_run(rt, run_id).model.get("model_id") or rt.settings.model_id
        rate = fleet.rate_limits.get(model_id)
        if rate is None:
            return {"wait_seconds": 0, "model_id": model_id}
        correct = lambda: correction(rt.store, run_id, rate.tokens_per_call)  # noqa: E731 - the last replies' real usage
        drawn = Buckets(rt.store.client, rt.store.table_name).draw(model_id, rate, correct=correct)
        return {"wait_seconds": drawn.wait_seconds, "model_id": model_id}
    raise InvalidInputError(f"op: {op!r} is not acquire, release or draw")


def _execution_ended(rt: Runtime, fleet: FleetSettings, detail: dict[str, Any]) -> dict[str, Any]:
    """Give back the slot (or the place in the queue) an ended execution held; a no-op for an
    execution that held none, or whose run has moved on to a later execution."""
    if detail.get("status") not in ENDED or fleet.concurrency is None:
        return {"released": False}
    try:
        run_id = json.loads(detail.get("input") or "{}").get("run_id")
    except (TypeError, ValueError):
        run_id = None
    if not isinstance(run_id, str) or not run_id:
        return {"released": False}
    run = rt.store.get(run_id, keys.RUN_RECORD)
    if run is None:  # refused at Init: it never queued
        return {"released": False}
    close_budget_asks(rt, run_id, run)  # its pending budget ask leaves the inbox (as Finish's does)
    key = key_of(run, fleet.concurrency.key)
    gate = slots(rt, fleet)
    released = gate.release(key, run_id, detail.get("executionArn"))
    return {"run_id": run_id, "key": key, "released": released, "woke": gate.woke}
