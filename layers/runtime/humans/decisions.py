"""Decisions: an approver's answer to a request, recorded once, then handed to the waiting task."""

from __future__ import annotations

import json
from typing import Any

from longstep.errors import ApprovalExpiredError
from longstep.humans.requests import view
from longstep.humans.table import ApprovalTable, Decision, arguments_digest

# Step Functions' answers to a task response for a token nobody waits on any more. AWS answers
# TaskTimedOut when "the task token has either expired or the task associated with the token has
# already been closed" (a timed-out wait, a stopped execution); moto answers InvalidToken for a
# token no running execution holds.
# https://docs.aws.amazon.com/step-functions/latest/apireference/API_SendTaskSuccess.html
_TASK_NOT_WAITING = ("TaskTimedOut", "InvalidToken", "TaskDoesNotExist")


def bind(decision: Decision, request: dict[str, Any]) -> Decision:
    """``decision`` bound to the digest of the arguments it decides on: an edit's, else the request's."""
    decided_on = decision.input if decision.decision == "edit" else json.loads(request["input"])
    return decision.model_copy(update={"args_digest": arguments_digest(decided_on)})


def decide(table: ApprovalTable, sfn: Any, approval_id: str, decision: Decision, seen_digest: str | None = None) -> dict[str, Any]:
    """Record ``decision`` if the request is still pending (and, with ``seen_digest``, still about
    the arguments of that digest), then resume the waiting task. A decision not yet bound to a
    digest (``bind``) is bound to the request's arguments as they are read here.

    Returns:
        The request's view after the decision.

    Raises:
        ApprovalNotFoundError: no such request.
        ApprovalAlreadyDecidedError: it was decided before (carries the first decision).
        ApprovalExpiredError: it timed out first, or its wait ended before the decision reached it
            (the request is then recorded as expired, with the decision as ``late_decision``).
        ApprovalStaleError: the request's arguments are no longer those of ``seen_digest``.
    """
    if decision.args_digest is None:
        current = table.get(approval_id)
        if current is not None:
            decision, seen_digest = bind(decision, current), current.get("input_digest")
    item = table.record_decision(approval_id, decision, seen_digest)
    body = decision.model_dump(exclude_none=True)
    try:
        sfn.send_task_success(taskToken=item["task_token"], output=json.dumps(body))
    except Exception as exc:  # noqa: BLE001 - sorted by Step Functions' error code below
        code = getattr(exc, "response", {}).get("Error", {}).get("Code")
        if code not in _TASK_NOT_WAITING:
            raise
        # The wait is over (it timed out, or its execution ended) and the model was, or will be,
        # told "timed out": the table must not say approved for a call that does not run. The
        # request is marked expired, the decision kept as ``late_decision``; a resumed run's
        # RequestApproval then hands it the timeout, as it would any expired request.
        table.expire(approval_id, late=body)
        raise ApprovalExpiredError(f"approval {approval_id} expired before the decision reached the run ({code})") from None
    return view(item)
