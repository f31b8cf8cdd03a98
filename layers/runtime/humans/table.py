"""The approvals table: one item per approval request, its status, and the writes that move it.

Each request is keyed by an unguessable id (``secrets.token_urlsafe``) and holds the run, turn
and call, the tool call, when it was requested and when it expires, its status (``pending``,
then ``approved``, ``rejected``, ``edited`` or ``expired``), the decision, the approver and when
they decided, and the task token of the waiting ``RequestApproval`` task. The token stays
server-side: views (``longstep.humans.requests.view``) are built from a list of public
attributes, and the ``by_status`` index does not even hold it.

Deciding is a conditional update (``pending`` and not past ``expires_at``), so the first decision
wins.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import secrets
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from longstep import codec, keys
from longstep.clock import now as clock_now
from longstep.errors import ApprovalAlreadyDecidedError, ApprovalExpiredError, ApprovalNotFoundError, ApprovalStaleError
from longstep.messages import canonical_json
from longstep.settings import DEFAULT_RETENTION_DAYS, Settings

PENDING, APPROVED, REJECTED, EDITED, EXPIRED = "pending", "approved", "rejected", "edited", "expired"
STATUSES = (PENDING, APPROVED, REJECTED, EDITED, EXPIRED)
STATUS_OF = {"approve": APPROVED, "reject": REJECTED, "edit": EDITED}
# What the task token is given when nobody decided in time (the state machine's ApprovalTimedOut
# state passes the same value to CallTool).
TIMEOUT_DECISION = {"decision": "timeout"}
ID_BYTES = 18  # 144 random bits: 24 URL-safe characters
_ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")


class Decision(BaseModel):
    """An approver's decision on one tool call.

    Attributes:
        decision: ``approve``, ``reject`` or ``edit``.
        reason: why (required to reject).
        input: the edited arguments (required to edit).
        approver: who decided.
        args_digest: the digest of the arguments decided on (``arguments_digest``: an edit's,
            else the request's); the call runs only with arguments of this digest.
    """

    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "reject", "edit"]
    reason: str | None = None
    input: dict[str, Any] | None = None
    approver: str = "unknown"
    args_digest: str | None = None

    @model_validator(mode="after")
    def _complete(self) -> "Decision":
        if self.decision == "reject" and not self.reason:
            raise ValueError("reason is required to reject")
        if self.decision == "edit" and self.input is None:
            raise ValueError("input is required to edit")
        return self


def arguments_digest(arguments: Any) -> str:
    """The digest a decision is bound to: sha256 of the arguments' canonical JSON (sorted keys)."""
    return "sha256:" + hashlib.sha256(canonical_json(arguments).encode("utf-8")).hexdigest()


def iso(epoch: Any) -> str | None:
    """Epoch seconds as ISO 8601 UTC (``2025-01-31T12:00:00Z``); None stays None."""
    if epoch is None:
        return None
    return dt.datetime.fromtimestamp(float(epoch), dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def is_approval_id(value: Any) -> bool:
    """Whether ``value`` could be an approval id (anything else names no request)."""
    return isinstance(value, str) and bool(_ID_PATTERN.fullmatch(value))


def new_approval_id() -> str:
    """An unguessable id (144 random bits, URL-safe) that does not start with ``-`` (it would read as
    a command-line option) or ``_``."""
    while True:
        fresh = secrets.token_urlsafe(ID_BYTES)
        if fresh[0].isalnum():
            return fresh


# One codec for DynamoDB items (longstep.codec).
_attr = codec.attribute
_plain = codec.plain


@dataclass
class ApprovalTable:
    """The approvals table.

    Args:
        table_name: the table.
        client: a boto3 DynamoDB client.
        retention_days: requests are purged (TTL) this many days after they were made.
        clock: epoch seconds now (tests move it).
    """

    table_name: str
    client: Any
    retention_days: int = DEFAULT_RETENTION_DAYS
    clock: Callable[[], float] = field(default=clock_now)

    @classmethod
    def from_settings(cls, settings: Settings, client: Any) -> "ApprovalTable":
        """The table the settings name, on the DynamoDB ``client``.

        Raises:
            SettingsError: the settings name no approvals table.
        """
        return cls(settings.approvals.table_name(), client, settings.retention_days)

    def _key(self, approval_id: str) -> dict[str, Any]:
        return {keys.approvals_table().partition_key: {"S": approval_id}}

    def create(self, approval_id: str, attrs: dict[str, Any]) -> bool:
        """Write a new pending request; False when ``approval_id`` exists already."""
        now = self.clock()
        item = {
            **self._key(approval_id),
            **{name: _attr(value) for name, value in attrs.items()},
            "status": {"S": PENDING},
            "requested_at": {"N": str(now)},
            keys.approvals_table().ttl_attribute: {"N": str(int(now) + self.retention_days * 86_400)},
        }
        try:
            self.client.put_item(
                TableName=self.table_name,
                Item=item,
                ConditionExpression="attribute_not_exists(approval_id)",
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            return False
        return True

    def get(self, approval_id: str) -> dict[str, Any] | None:
        """The request (token included: server-side use only), strongly consistent; None when absent."""
        item = self.client.get_item(TableName=self.table_name, Key=self._key(approval_id), ConsistentRead=True).get("Item")
        return _plain(item) if item else None

    def _update(self, approval_id: str, **kwargs: Any) -> dict[str, Any] | None:
        """A conditional update; the item after it, or None when the condition failed."""
        try:
            resp = self.client.update_item(TableName=self.table_name, Key=self._key(approval_id), ReturnValues="ALL_NEW", **kwargs)
        except self.client.exceptions.ConditionalCheckFailedException:
            return None
        return _plain(resp["Attributes"])

    def attach_token(self, approval_id: str, token: str, expires_at: float) -> bool:
        """Give a still-pending request the token of a new attempt; False once it is decided."""
        return (
            self._update(
                approval_id,
                UpdateExpression="SET task_token = :tok, expires_at = :exp",
                ConditionExpression="#st = :pending",
                ExpressionAttributeNames={"#st": "status"},
                ExpressionAttributeValues={":tok": {"S": token}, ":exp": {"N": str(expires_at)}, ":pending": {"S": PENDING}},
            )
            is not None
        )

    def mark_notified(self, approval_id: str) -> None:
        self.client.update_item(
            TableName=self.table_name,
            Key=self._key(approval_id),
            UpdateExpression="SET notified_at = :t",
            ExpressionAttributeValues={":t": {"N": str(self.clock())}},
        )

    def record_decision(self, approval_id: str, decision: Decision, seen_digest: str | None = None) -> dict[str, Any]:
        """Record ``decision`` if the request is pending, not past its deadline and, with
        ``seen_digest``, still about the arguments of that digest (one conditional update).

        Returns:
            The request after the update (with its token, to hand the decision to).

        Raises:
            ApprovalNotFoundError: no such request.
            ApprovalExpiredError: it timed out (it is marked expired if it was not yet).
            ApprovalAlreadyDecidedError: decided before (carries the first decision).
            ApprovalStaleError: the request's arguments are no longer those of ``seen_digest``.
        """
        if not is_approval_id(approval_id):
            raise ApprovalNotFoundError(f"approval_id: no approval {approval_id[:64]!r}")
        now = self.clock()
        body = decision.model_dump(exclude_none=True)
        # This attempt's own mark: a retry of this very update (its response lost, the SDK sent it
        # again) finds it and knows the decision is its own, not an earlier approver's.
        attempt = new_approval_id()
        values = {
            ":status": {"S": STATUS_OF[decision.decision]},
            ":pending": {"S": PENDING},
            ":d": {"S": json.dumps(body)},
            ":who": {"S": decision.approver},
            ":t": {"N": str(now)},
            ":attempt": {"S": attempt},
        }
        condition = "#st = :pending AND expires_at > :t"
        if seen_digest is not None:
            # A request made before digests were recorded has none: it is bound from its decision on.
            condition += " AND (attribute_not_exists(input_digest) OR input_digest = :seen)"
            values[":seen"] = {"S": seen_digest}
        updated = self._update(
            approval_id,
            UpdateExpression="SET #st = :status, decision = :d, approver = :who, decided_at = :t, decision_attempt = :attempt",
            ConditionExpression=condition,
            ExpressionAttributeNames={"#st": "status"},
            ExpressionAttributeValues=values,
        )
        if updated is not None:
            return updated
        existing = self.get(approval_id)
        if existing is None:
            raise ApprovalNotFoundError(f"approval_id: no approval {approval_id!r}")
        if existing.get("decision_attempt") == attempt:
            return existing  # our update took effect; only its response was lost
        if existing["status"] == PENDING and seen_digest is not None and existing.get("input_digest", seen_digest) != seen_digest:
            raise ApprovalStaleError(
                f"approval {approval_id}: its arguments changed since they were shown; nothing was decided", existing.get("input_digest")
            )
        if existing["status"] == PENDING:  # past its deadline: the task has timed out, or is about to
            self.expire(approval_id)
            existing = self.get(approval_id) or existing
        if existing["status"] == EXPIRED:
            raise ApprovalExpiredError(f"approval {approval_id} expired at {iso(existing.get('expires_at'))}")
        first = json.loads(existing.get("decision") or "{}")
        raise ApprovalAlreadyDecidedError(f"approval {approval_id} was already {existing['status']}", first, existing["status"])

    def expire(self, approval_id: str, *, late: dict[str, Any] | None = None) -> bool:
        """Mark a request expired: nobody decided before its task timed out.

        Args:
            late: a decision recorded as the task timed out (it did not reach the run): the
                request is marked expired anyway, and the decision kept as ``late_decision``.

        Returns:
            False when the request was no longer pending (and ``late`` was not given).
        """
        values: dict[str, Any] = {
            ":expired": {"S": EXPIRED},
            ":d": {"S": json.dumps(TIMEOUT_DECISION)},
            ":t": {"N": str(self.clock())},
        }
        expression = "SET #st = :expired, decision = :d, decided_at = :t"
        if late is not None:
            expression += ", late_decision = :late"
            values[":late"] = {"S": json.dumps(late)}
            condition = "attribute_exists(approval_id)"
        else:
            condition = "#st = :pending"
            values[":pending"] = {"S": PENDING}
        return (
            self._update(
                approval_id,
                UpdateExpression=expression,
                ConditionExpression=condition,
                ExpressionAttributeNames={"#st": "status"},
                ExpressionAttributeValues=values,
            )
            is not None
        )

    def rebind(self, approval_id: str, token: str, expires_at: float, arguments: dict[str, Any]) -> bool:
        """Ask a request again for other arguments (the call was asked for anew with arguments
        that differ from the request's): pending once more, with the new arguments, their digest,
        the new attempt's token and deadline; an earlier decision was on other arguments and is
        dropped (kept as ``earlier_decision``), and the approvers are notified again. False when
        the request's arguments are these already (or it has no digest: made before digests)."""
        digest = arguments_digest(arguments)
        return (
            self._update(
                approval_id,
                UpdateExpression=(
                    "SET #st = :pending, task_token = :tok, expires_at = :exp, #in = :input, input_digest = :digest,"
                    " earlier_input_digest = input_digest, earlier_decision = if_not_exists(decision, :none)"
                    " REMOVE decision, approver, decided_at, decision_attempt, notified_at, late_decision"
                ),
                ConditionExpression="input_digest <> :digest",
                ExpressionAttributeNames={"#st": "status", "#in": "input"},
                ExpressionAttributeValues={
                    ":pending": {"S": PENDING},
                    ":tok": {"S": token},
                    ":exp": {"N": str(expires_at)},
                    ":input": _attr(arguments),
                    ":digest": {"S": digest},
                    ":none": {"S": "none"},
                },
            )
            is not None
        )

    def reopen(self, approval_id: str, token: str, expires_at: float) -> bool:
        """Make a request expired with a late decision pending again, for a new attempt's token
        (``requests.request``: that decision reached no task); the late decision is kept as
        ``earlier_late_decision`` and the approvers are notified again. False when it changed meanwhile."""
        return (
            self._update(
                approval_id,
                UpdateExpression=(
                    "SET #st = :pending, task_token = :tok, expires_at = :exp, earlier_late_decision = late_decision"
                    " REMOVE late_decision, decision, approver, decided_at, decision_attempt, notified_at"
                ),
                ConditionExpression="#st = :expired AND attribute_exists(late_decision)",
                ExpressionAttributeNames={"#st": "status"},
                ExpressionAttributeValues={
                    ":pending": {"S": PENDING},
                    ":expired": {"S": EXPIRED},
                    ":tok": {"S": token},
                    ":exp": {"N": str(expires_at)},
                },
            )
            is not None
        )

    def restore(self, approval_id: str, status: str) -> bool:
        """Put a request expired with a late decision back to ``status``, the late decision as its
        decision (``requests.decision_reached``: that decision did reach the run)."""
        return (
            self._update(
                approval_id,
                UpdateExpression="SET #st = :status, decision = late_decision REMOVE late_decision",
                ConditionExpression="#st = :expired AND attribute_exists(late_decision)",
                ExpressionAttributeNames={"#st": "status"},
                ExpressionAttributeValues={":status": {"S": status}, ":expired": {"S": EXPIRED}},
            )
            is not None
        )

    def by_status(self, status: str, run_id: str | None = None) -> list[dict[str, Any]]:
        """Requests in ``status`` (a run's only, when given), in run, turn and call order.

        Reads the ``by_status`` index: eventually consistent, and without task tokens.
        """
        schema = keys.approvals_table()
        (index,) = schema.indexes
        condition = "#st = :status"
        values: dict[str, Any] = {":status": {"S": status}}
        if run_id is not None:
            condition += " AND begins_with(#rc, :run)"
            values[":run"] = {"S": f"{run_id}#"}
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": index.name,
            "KeyConditionExpression": condition,
            "ExpressionAttributeNames": {"#st": index.partition_key, **({"#rc": index.sort_key} if run_id is not None else {})},
            "ExpressionAttributeValues": values,
        }
        out: list[dict[str, Any]] = []
        while True:
            resp = self.client.query(**kwargs)
            out.extend(_plain(item) for item in resp.get("Items", []))
            if "LastEvaluatedKey" not in resp:
                return out
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]
