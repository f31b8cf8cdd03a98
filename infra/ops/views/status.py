"""Where a run stands (``RunState``, in the statuses of ``longstep.run_status``), and ages such as ``2h``."""

from __future__ import annotations

import re
from dataclasses import dataclass

from longstep import clock, run_status
from longstep_kit.ops.views import InspectError
from longstep_kit.ops.views.history import Execution

# The one vocabulary (``longstep.run_status``): its names, as the views have always imported them.
RUNNING, PAUSED, WAITING_FOR_APPROVAL, WAITING_FOR_EVENT, ESCALATED = (
    run_status.RUNNING,
    run_status.PAUSED,
    run_status.WAITING_FOR_APPROVAL,
    run_status.WAITING_FOR_EVENT,
    run_status.ESCALATED,
)
SUCCEEDED, STOPPED, FAILED, TIMED_OUT, ABORTED = (
    run_status.SUCCEEDED,
    run_status.STOPPED,
    run_status.FAILED,
    run_status.TIMED_OUT,
    run_status.ABORTED,
)
STATUSES = run_status.STATUSES
# The statuses of a run that waits on something outside itself (``longstep stuck``).
WAITING_STATUSES = run_status.WAITING
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
        reason: why it is in this status, when there is one: a stopped run's stop reason, the
            error of a failed, timed-out, aborted or escalated one, who paused a paused one.
    """

    run_id: str
    status: str
    since: float
    detail: str = ""
    execution: Execution | None = None
    executions: int = 1
    reason: str | None = None

    def age(self, now: float | None = None) -> float:
        """Seconds the run has been in its status."""
        return max(0.0, (clock.now() if now is None else now) - self.since)
