"""Records in the checkpoint table of work parked on a Step Functions task token: escalations.

(Approvals have a table of their own: ``longstep.humans.table``, with the same first-answer-wins rule.)

The task token stays in the record, server-side: listings never include it. Resolving a record
is a conditional update (pending -> decided), so the first answer wins; only then is the answer
handed to the token, which resumes the execution.
"""

from __future__ import annotations

import json
from typing import Any

from longstep import clock
from longstep import keys
from longstep.errors import AlreadyDecidedError, WaitClosedError, WaitNotFoundError
from longstep.store import CheckpointStore, Condition

PENDING = "pending"
DECIDED = "decided"
CLOSED = "closed"  # answered after its wait was over: nothing was resumed
# Step Functions' answers for a token nobody waits on any more (the execution stopped, the wait
# timed out): https://docs.aws.amazon.com/step-functions/latest/apireference/API_SendTaskSuccess.html
_DEAD_TOKEN_ERRORS = ("TaskTimedOut", "InvalidToken", "TaskDoesNotExist")


def park(store: CheckpointStore, run_id: str, sk: str, token: str, attrs: dict[str, Any]) -> str:
    """Record that ``sk`` waits on ``token``; a decided record becomes pending again (a new
    escalation of the same step), counted in ``times``.

    Returns:
        ``pending``.
    """
    existing = store.get(run_id, sk)
    record = {**attrs, "status": PENDING, "task_token": token, "requested_at": clock.now()}
    if existing and existing.get("status") == PENDING:
        record["requested_at"] = existing["requested_at"]
    if existing:
        record["times"] = int(existing.get("times", 1)) + 1
    store.put(run_id, sk, record)
    return PENDING


def pending(store: CheckpointStore, run_id: str, prefix: str) -> list[dict[str, Any]]:
    """The run's pending records under ``prefix``, without their task tokens."""
    out = []
    for item in store.query_prefix(run_id, prefix):
        if item.get("status") == PENDING:
            shown = {k: v for k, v in item.items() if k not in ("task_token", keys.checkpoint_table().ttl_attribute)}
            shown["run_id"] = run_id
            out.append(shown)
    return out


def resolve(store: CheckpointStore, sfn: Any, run_id: str, sk: str, body: dict[str, Any]) -> dict[str, Any]:
    """Record ``body`` as the answer if the record is pending, then resume the waiting task.

    Raises:
        WaitNotFoundError: no such record.
        AlreadyDecidedError: answered before (carries the first answer).
        WaitClosedError: its wait is over (a stopped execution, a timed-out wait): the answer is
            kept as ``late_answer`` and nothing resumes.
    """
    before = store.update(
        run_id, sk, {"status": DECIDED, "decision": json.dumps(body), "decided_at": clock.now()}, when=Condition(equal={"status": PENDING})
    )
    if before is None:
        existing = store.get(run_id, sk)
        if existing is None:
            raise WaitNotFoundError(f"nothing is waiting at {run_id}/{sk}") from None
        first = json.loads(existing.get("decision") or "{}")
        raise AlreadyDecidedError(f"{run_id}/{sk} was already decided", first) from None
    try:
        sfn.send_task_success(taskToken=before["task_token"], output=json.dumps(body))
    except Exception as exc:  # noqa: BLE001 - sorted by Step Functions' error code
        if (getattr(exc, "response", None) or {}).get("Error", {}).get("Code") not in _DEAD_TOKEN_ERRORS:
            raise
        # A resumed run parks the step again (pending once more) and is asked again.
        store.update(
            run_id, sk, {"status": CLOSED, "late_answer": json.dumps(body)}, remove=("task_token",), when=Condition(equal={"status": DECIDED})
        )
        raise WaitClosedError(f"{run_id}/{sk}: its wait is over (the execution stopped or the wait timed out); nothing was resumed") from None
    return body
