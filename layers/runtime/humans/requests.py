"""Approval requests: a human decides on a tool call before it runs; the first decision wins.

The checkpoint table keeps one small record per approval call (``keys.approval_key``) naming the
request's id: a retried ``RequestApproval`` finds the request it made before instead of making a
second one, and a run's approvals are read back from its log with strongly consistent reads.
The requests themselves live in the approvals table (``longstep.humans.table``).
"""

from __future__ import annotations

import json
from typing import Any, Callable

from longstep import keys
from longstep.errors import ApprovalNotFoundError
from longstep.humans.notifications import log_failed_notification
from longstep.humans.table import (
    EXPIRED,
    PENDING,
    STATUS_OF,
    TIMEOUT_DECISION,
    ApprovalTable,
    arguments_digest,
    is_approval_id,
    iso,
    new_approval_id,
)
from longstep.settings import DEFAULT_APPROVAL_TIMEOUT_SECONDS
from longstep.store import AlreadyRecordedError, CheckpointStore


def view(item: dict[str, Any], now: float | None = None) -> dict[str, Any]:
    """What an approver may see of a request: every public attribute, never the task token.

    A pending request past its deadline shows as ``expired`` (its task has timed out or is about to).
    """
    status = item["status"]
    if status == PENDING and now is not None and float(item.get("expires_at", now + 1)) <= now:
        status = EXPIRED
    return {
        "approval_id": item["approval_id"],
        "run_id": item["run_id"],
        "turn": int(item["turn"]),
        "call": int(item["call"]),
        "tool": item["tool"],
        "input": json.loads(item["input"]),
        "input_digest": item.get("input_digest"),
        "status": status,
        "requested_at": iso(item.get("requested_at")),
        "expires_at": iso(item.get("expires_at")),
        "decision": json.loads(item["decision"]) if item.get("decision") else None,
        "approver": item.get("approver"),
        "decided_at": iso(item.get("decided_at")),
    }


def _claim_id(store: CheckpointStore, run_id: str, turn: int, call: int) -> str:
    """The id of this call's request: the one named in the run's log, else a new one, recorded once."""
    sk = keys.approval_key(turn, call)
    found = store.get(run_id, sk)
    if found is None:
        fresh = new_approval_id()
        try:
            store.put_once(run_id, sk, {"approval_id": fresh})
            return fresh
        except AlreadyRecordedError:  # a concurrent duplicate recorded its id first
            found = store.get(run_id, sk)
    assert found is not None
    return str(found["approval_id"])


def approval_id_of(store: CheckpointStore, run_id: str, turn: int, call: int) -> str | None:
    """The id of the request made for call ``call`` of ``turn``, or None."""
    found = store.get(run_id, keys.approval_key(turn, call))
    return str(found["approval_id"]) if found else None


def request(
    table: ApprovalTable,
    store: CheckpointStore,
    sfn: Any,
    *,
    run_id: str,
    turn: int,
    call: int,
    tool: str,
    tool_input: dict[str, Any],
    agent: str,
    token: str,
    timeout_seconds: int = DEFAULT_APPROVAL_TIMEOUT_SECONDS,
    notify: Callable[[dict[str, Any]], None] | None = None,
    unanswered: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """Make (or find again) the request for one tool call and park ``token`` on it.

    A retried or resumed task finds the request made before: still pending, it takes the new
    token (and deadline); already decided or expired, its decision goes to the new token at once,
    so a retry can never leave the run waiting for a decision that was already made. Two
    exceptions: a decision that reached no task (``late_decision``: its execution had stopped)
    for a call that has no result yet is asked again, since nothing, the model included, was
    told anything, and the approver was told "expired"; and a request whose arguments differ
    from ``tool_input`` (by digest) is asked again for these arguments: a decision is bound to the
    arguments it was made on.

    Args:
        notify: called with the request's view until one call succeeds (at least once per request);
            a failure is logged, never raised: the request stands and can be listed.
        unanswered: whether the call still has no recorded result (None: never asked again).

    Returns:
        ``approval_id`` and ``status``: ``pending`` (waiting for a human) or ``decided``.
    """
    approval_id = _claim_id(store, run_id, turn, call)
    expires_at = table.clock() + timeout_seconds
    attrs = {
        "run_id": run_id,
        "turn": turn,
        "call": call,
        "run_call": keys.approval_run_call(run_id, turn, call),
        "tool": tool,
        "input": tool_input,
        "input_digest": arguments_digest(tool_input),
        "agent": agent,
        "task_token": token,
        "expires_at": expires_at,
    }
    created = table.create(approval_id, attrs) or table.rebind(approval_id, token, expires_at, tool_input)
    if not created and not table.attach_token(approval_id, token, expires_at):
        existing = table.get(approval_id)
        assert existing is not None
        late = existing.get("status") == EXPIRED and existing.get("late_decision")
        if not (late and unanswered is not None and unanswered() and table.reopen(approval_id, token, expires_at)):
            sfn.send_task_success(taskToken=token, output=existing.get("decision") or json.dumps(TIMEOUT_DECISION))
            return {"approval_id": approval_id, "status": "decided"}
    item = table.get(approval_id)
    if notify is not None and item is not None and not item.get("notified_at"):
        try:
            notify(view(item))
        except Exception as exc:  # noqa: BLE001 - the request stands: approvers can still list it
            log_failed_notification(approval_id, exc)
        else:
            table.mark_notified(approval_id)
    return {"approval_id": approval_id, "status": PENDING}


def get_approval(table: ApprovalTable, approval_id: str) -> dict[str, Any]:
    """One request's view.

    Raises:
        ApprovalNotFoundError: no such request.
    """
    item = table.get(approval_id) if is_approval_id(approval_id) else None
    if item is None:
        raise ApprovalNotFoundError(f"approval_id: no approval {approval_id[:64]!r}")
    return view(item, table.clock())


def pending_approvals(table: ApprovalTable, run_id: str | None = None) -> list[dict[str, Any]]:
    """Requests waiting for a decision (a run's only, when given), without their task tokens."""
    return list_approvals(table, PENDING, run_id)


def list_approvals(table: ApprovalTable, status: str = PENDING, run_id: str | None = None) -> list[dict[str, Any]]:
    """Requests in ``status`` (a run's only, when given), as views.

    A pending request past its deadline is left out of the pending list (it shows as expired).
    """
    now = table.clock()
    shown = [view(item, now) for item in table.by_status(status, run_id)]
    return [v for v in shown if v["status"] == status]


def run_approvals(table: ApprovalTable, store: CheckpointStore, run_id: str) -> list[dict[str, Any]]:
    """Every request of a run, in turn and call order, read through the run's log (strongly consistent)."""
    out = []
    for record in store.query_prefix(run_id, "approval#"):
        item = table.get(str(record["approval_id"]))
        if item is not None:
            out.append(view(item, table.clock()))
    return out


def expire_call(table: ApprovalTable, store: CheckpointStore, run_id: str, turn: int, call: int) -> bool:
    """Mark the request of a call expired (its task timed out); a later decision then gets 'expired'."""
    approval_id = approval_id_of(store, run_id, turn, call)
    return bool(approval_id) and table.expire(approval_id)


def decision_reached(table: ApprovalTable, store: CheckpointStore, run_id: str, turn: int, call: int, decision: dict[str, Any]) -> bool:
    """The call got ``decision``: a request marked expired with it as ``late_decision`` says it again.

    ``decide`` marks a request expired when ``SendTaskSuccess`` answers that the task is closed;
    that is also the answer to the SDK's retry of a ``SendTaskSuccess`` that took effect and whose
    response was lost. The call that received the decision settles it.

    Returns:
        True when the request was put back to the decision that reached the call.
    """
    approval_id = approval_id_of(store, run_id, turn, call)
    # One decision can be recorded per request: the late one is the one that reached the call.
    return bool(approval_id) and table.restore(str(approval_id), STATUS_OF[decision["decision"]])
