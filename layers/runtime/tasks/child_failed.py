"""ChildFailed: a child run about to fail (aborted at an escalation, or one nobody answered) tells
its parent's delegated call (the ``<Step>TellParent`` states)."""

from __future__ import annotations

from typing import Any

from longstep import keys, runs_index
from longstep.child_runs import answer_parent
from longstep.errors import InvalidInputError
from longstep.inputs import ParentLink, parse_model
from longstep.contract.steps import ChildFailedOutput
from longstep.runtime import Runtime
from longstep.tasks.common import load_run


def child_failed(rt: Runtime, event: Any) -> ChildFailedOutput:
    """A child run is about to fail (a human aborted it at an escalation, or nobody answered one): tell its parent.

    The input is the failed state's input (a cursor, a tool call item, or Init's start input: each
    carries ``run_id``), with the caught error under ``error``. A child whose Init failed before
    its run record was written is linked to its parent by its start input's ``parent``.
    """
    if not isinstance(event, dict) or not isinstance(event.get("run_id"), str):
        raise InvalidInputError("run_id: the failing run's id is required")
    if rt.store.get(event["run_id"], keys.RUN_RECORD) is None and event.get("parent") is not None:
        run: dict[str, Any] = {"parent": parse_model(ParentLink, event["parent"], "start input's parent").model_dump()}
    else:
        run = load_run(rt, event["run_id"])
    error = event.get("error") if isinstance(event.get("error"), dict) else {}
    if error.get("Error") == "EscalationTimedOut":  # the state machine's Unanswered path
        cause = f"run {event['run_id']} failed: no human answered its escalation before it timed out"
    else:
        cause = f"run {event['run_id']} was aborted: {error.get('Error', 'a human aborted it at an escalation')}"
    parent = answer_parent(rt, run, {"run_id": event["run_id"], "status": "FAILED", "cause": cause}, failed=True)
    runs_index.on_status(rt.store, event["run_id"], runs_index.FAILED)  # the escalated step's error stays the run's error
    return {"run_id": event["run_id"], "parent": parent}
