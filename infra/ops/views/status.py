"""A run's status: the statuses, where a run stands (``RunState``), and ages such as ``2h``."""

from __future__ import annotations

import re
from dataclasses import dataclass

from longstep import clock
from longstep_kit.ops.views import InspectError
from longstep_kit.ops.views.history import Execution

RUNNING = "running"
WAITING_FOR_APPROVAL = "waiting_for_approval"
WAITING_FOR_EVENT = "waiting_for_event"
ESCALATED = "escalated"
FAILED = "failed"
SUCCEEDED = "succeeded"
STATUSES = (RUNNING, WAITING_FOR_APPROVAL, WAITING_FOR_EVENT, ESCALATED, FAILED, SUCCEEDED)
# The statuses of a run that waits on something outside itself (``longstep stuck``).
WAITING_STATUSES = (WAITING_FOR_APPROVAL, WAITING_FOR_EVENT, ESCALATED)
_AGE = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def parse_age(text: str) -> float:
    """Seconds in an age such as ``30m``, ``2h``, ``3d``, ``1h30m`` or ``0s``.

    Units: ``s``, ``m``, ``h``, ``d``, ``w``; a bare number is seconds.

    Raises:
        InspectError: the text is not an age.
    """
    value = text.strip().lower()
    if re.fullmatch(r"\d+(?:\.\d+)?", value):
        return float(value)
    if not value or _AGE.sub("", value):
        raise InspectError(f"{text!r} is not an age: use a number and a unit (s, m, h, d, w), e.g. 30m, 2h, 3d, 1h30m")
    return float(sum(float(n) * _AGE_UNITS[unit] for n, unit in _AGE.findall(value)))


@dataclass(frozen=True)
class RunState:
    """Where a run stands.

    Attributes:
        run_id: the run.
        status: one of :data:`STATUSES`.
        since: when the run entered this status (epoch seconds): when the approval, escalation or
            wait was requested, when the last execution stopped, or when it started.
        detail: what it waits for, why it is escalated, how it failed.
        execution: the run's latest execution (None when the history has expired).
        executions: how many executions the run has had.
    """

    run_id: str
    status: str
    since: float
    detail: str = ""
    execution: Execution | None = None
    executions: int = 1

    def age(self, now: float | None = None) -> float:
        """Seconds the run has been in its status."""
        return max(0.0, (clock.now() if now is None else now) - self.since)
