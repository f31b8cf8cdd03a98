"""The one vocabulary of a run's status, and how each is told from the run's execution and records.

Every surface says a run's status in these words: the runs index (``longstep.runs_index``),
``longstep runs`` (``--status``, ``--where``), ``show``, ``status``, ``watch``, the run UI and the
exit codes. A status is told from the run's latest execution (Step Functions) and its records:

========================  ==================================================================  ====
status                    when                                                                exit
========================  ==================================================================  ====
``running``               the latest execution runs and waits for nothing below               0
``paused``                it is parked by ``longstep pause`` (no compute until a resume)      0
``waiting_for_approval``  a tool call waits for an approver                                   0
``waiting_for_event``     a ``wait_for`` waits for a signal or a timer                        0
``escalated``             a step waits for a human to retry, skip or abort it                 0
``succeeded``             the latest execution SUCCEEDED and the run ended on its own         0
``stopped``               the latest execution SUCCEEDED because ``longstep stop`` ended it   1
``failed``                the latest execution FAILED                                         1
``timed_out``             the latest execution TIMED_OUT                                      1
``aborted``               the latest execution was ABORTED (StopExecution)                    1
========================  ==================================================================  ====

The runs index records the statuses its tasks see (:data:`RECORDED`); the others of an open run
(paused, the waits) are read from the run's records when it is listed. The exit code is that of
``longstep status``, ``watch`` and ``show --follow``: 0 for a run that succeeded or has not ended,
1 for one that ended without succeeding (a stopped run included: a script gating on ``status``
never takes a stopped run for a success).
"""

from __future__ import annotations

import json
from typing import Any, Mapping

# ``longstep.steering.PAUSE_TOKEN`` (steering imports what imports this module; a test holds them equal).
PAUSE_TOKEN = "pause_token"

RUNNING = "running"
PAUSED = "paused"
WAITING_FOR_APPROVAL = "waiting_for_approval"
WAITING_FOR_EVENT = "waiting_for_event"
ESCALATED = "escalated"
SUCCEEDED = "succeeded"
STOPPED = "stopped"
FAILED = "failed"
TIMED_OUT = "timed_out"
ABORTED = "aborted"

STATUSES = (RUNNING, PAUSED, WAITING_FOR_APPROVAL, WAITING_FOR_EVENT, ESCALATED, SUCCEEDED, STOPPED, FAILED, TIMED_OUT, ABORTED)
# A run in one of these has not ended: its latest execution runs.
OPEN = (RUNNING, PAUSED, WAITING_FOR_APPROVAL, WAITING_FOR_EVENT, ESCALATED)
# A run in one of these waits on something outside itself (``longstep stuck``).
WAITING = (PAUSED, WAITING_FOR_APPROVAL, WAITING_FOR_EVENT, ESCALATED)
ENDED = (SUCCEEDED, STOPPED, FAILED, TIMED_OUT, ABORTED)
# The statuses the runs index records (its tasks see these transitions).
RECORDED = (RUNNING, ESCALATED, SUCCEEDED, STOPPED, FAILED, TIMED_OUT, ABORTED)
# An ended execution's status (Step Functions) -> the run's, when the run was not stopped.
EXECUTION_ENDS = {"SUCCEEDED": SUCCEEDED, "FAILED": FAILED, "TIMED_OUT": TIMED_OUT, "ABORTED": ABORTED}

EXIT_ENDED_WELL = 0
EXIT_ENDED_BADLY = 1

DESCRIPTIONS = {
    RUNNING: "the latest execution runs and waits for nothing below",
    PAUSED: "parked by `longstep pause` at a model turn: no compute until `longstep resume`",
    WAITING_FOR_APPROVAL: "a tool call waits for an approver (a pending request in the approvals table)",
    WAITING_FOR_EVENT: "a `wait_for` waits for a signal (`signal#` record `waiting`) or a timer",
    ESCALATED: "a step waits for a human to retry, skip or abort it (`escalation#` record `pending`)",
    SUCCEEDED: "the latest execution SUCCEEDED and the run ended on its own (its final answer, or `max_turns`)",
    STOPPED: "`longstep stop` (or the run UI's Stop) ended it at a step boundary: its execution SUCCEEDED; resumable",
    FAILED: "the latest execution FAILED (an escalation answered abort or timed out, an error no step caught)",
    TIMED_OUT: "the latest execution TIMED_OUT (the state machine's time limit)",
    ABORTED: "the latest execution was ABORTED (StopExecution from outside Longstep)",
}


def exit_code(status: str) -> int:
    """The exit code of a command that reports a run in ``status`` (``status``, ``watch``, ``show --follow``).

    0 for a run that succeeded or has not ended; 1 for a run that ended without succeeding,
    a stopped run included.
    """
    return EXIT_ENDED_BADLY if status in ENDED and status != SUCCEEDED else EXIT_ENDED_WELL


def stop_reason(output: Any) -> str | None:
    """Why the run was stopped, from its final output (the ``final`` record's or the execution's,
    a dict or its JSON text); None when it was not stopped."""
    if isinstance(output, (str, bytes)):
        try:
            output = json.loads(output)
        except ValueError:
            return None
    if isinstance(output, Mapping) and output.get("status") == "STOPPED":
        return str(output.get("stop_reason") or "stopped")
    return None


def of_ended(execution_status: str, final_output: Any = None) -> str:
    """The status of a run whose latest execution has ended in ``execution_status``.

    Args:
        execution_status: ``SUCCEEDED``, ``FAILED``, ``TIMED_OUT`` or ``ABORTED``.
        final_output: the run's final output (``final`` record or execution output), which says
            whether a success was a stop.
    """
    if execution_status == "SUCCEEDED" and stop_reason(final_output) is not None:
        return STOPPED
    return EXECUTION_ENDS.get(execution_status, FAILED)


def is_paused(run_record: Mapping[str, Any] | None) -> bool:
    """The run record says the run is parked by a pause (its Pause state holds a task token)."""
    return bool(run_record and run_record.get(PAUSE_TOKEN))


def table_rows() -> list[tuple[str, str, int]]:
    """``(status, when, exit code)`` of every status, in order: the table the docs print."""
    return [(s, DESCRIPTIONS[s], exit_code(s)) for s in STATUSES]
