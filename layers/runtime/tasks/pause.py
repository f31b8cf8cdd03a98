"""Pause: a paused run parked on a task token until ``longstep resume`` hands it back (``longstep.steering``)."""

from __future__ import annotations

from typing import Any

from longstep import steering
from longstep.errors import InvalidInputError
from longstep.contract.steps import ParkedOutput
from longstep.runtime import Runtime
from longstep.inputs import task_token
from longstep.tasks.common import keep_records, load_run

# A Standard execution lasts at most a year: no pause outlives it.
# https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html
MAX_PAUSE_SECONDS = 365 * 86_400


def pause(rt: Runtime, event: Any) -> ParkedOutput:
    """Pause: keep the token on the run record (or hand it back at once if the run was resumed meanwhile).

    A pause may last as long as the execution may (a year): the run's records are kept that long.
    """
    token = task_token(event)
    run_id = event.get("run_id")
    if not isinstance(run_id, str):
        raise InvalidInputError("run_id: the paused run's id is required")
    run = load_run(rt, run_id)
    status = steering.park(rt.store, rt.step_functions(), run_id, token)
    if status == "paused":
        keep_records(rt, run_id, run, MAX_PAUSE_SECONDS)
    return {"run_id": run_id, "status": status}
