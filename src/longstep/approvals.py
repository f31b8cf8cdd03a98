"""Approvals: a human decides on a tool call before it runs; the first decision wins.

Each request is one item of the approvals table, keyed by an unguessable id
(``secrets.token_urlsafe``): the run, turn and call, the tool call, when it was requested and when
it expires, its status (``pending``, then ``approved``, ``rejected``, ``edited`` or ``expired``),
the decision, the approver and when they decided, and the task token of the waiting
``RequestApproval`` task. The token stays server-side: views (``view``) are built from a list of
public attributes, and the ``by_status`` index does not even hold it.

The checkpoint table keeps one small record per approval call (``keys.approval_key``) naming the
request's id: a retried ``RequestApproval`` finds the request it made before instead of making a
second one, and a run's approvals are read back from its log with strongly consistent reads.

Deciding is a conditional update (``pending`` and not past ``expires_at``), so the first decision
wins; only then is the decision handed to the task token, which resumes the execution.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import secrets
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from longstep.clock import now as clock_now
from longstep import environment
from longstep import keys
from longstep import settings as env
from longstep.errors import LongstepError
from longstep.store import AlreadyRecordedError, CheckpointStore

PENDING, APPROVED, REJECTED, EDITED, EXPIRED = "pending", "approved", "rejected", "edited", "expired"
STATUSES = (PENDING, APPROVED, REJECTED, EDITED, EXPIRED)
STATUS_OF = {"approve": APPROVED, "reject": REJECTED, "edit": EDITED}
# What the task token is given when nobody decided in time (the state machine's ApprovalTimedOut
# state passes the same value to CallTool).
TIMEOUT_DECISION = {"decision": "timeout"}
DEFAULT_TIMEOUT_SECONDS = 7 * 86_400
ID_BYTES = 18  # 144 random bits: 24 URL-safe characters
# Step Functions' answers to a task response for a token nobody waits on any more.
_TASK_GONE = ("InvalidToken", "TaskDoesNotExist")
_TASK_TIMED_OUT = "TaskTimedOut"


class ApprovalNotFoundError(LongstepError):
    """No approval request with this id."""


class ApprovalAlreadyDecidedError(LongstepError):
    """The request was decided before; the first decision stands (``decision``, ``status``)."""

    def __init__(self, message: str, decision: dict[str, Any], status: str) -> None:
        super().__init__(message)
        self.decision = decision
        self.status = status


class ApprovalExpiredError(LongstepError):
    """The request timed out before anyone decided; the model was told so."""


class Decision(BaseModel):
    """An approver's decision on one tool call.

    Attributes:
        decision: ``approve``, ``reject`` or ``edit``.
        reason: why (required to reject).
        input: the edited arguments (required to edit).
        approver: who decided.
    """

    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "reject", "edit"]
    reason: str | None = None
    input: dict[str, Any] | None = None
    approver: str = "unknown"

    @model_validator(mode="after")
    def _complete(self) -> "Decision":
        if self.decision == "reject" and not self.reason:
            raise ValueError("reason is required to reject")
        if self.decision == "edit" and self.input is None:
            raise ValueError("input is required to edit")
        return self


@dataclass(frozen=True)
class ApprovalSettings:
    """Where approvals live and how long they wait, from the function's environment.

    Attributes:
        table: the approvals table.
        topic_arn: the SNS topic told of each request (None: nobody is notified).
        timeout_seconds: how long a request waits (the RequestApproval task's timeout).
        retention_days: how long a request is kept (DynamoDB TTL on ``purge_at``).
        api_url: the approval API's base URL, for the notification (None when unknown).
    """

    table: str
    topic_arn: str | None = None
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS
    retention_days: int = env.DEFAULT_RETENTION_DAYS
    api_url: str | None = None

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> "ApprovalSettings":
        """Read the settings (the function's environment by default: ``longstep.environment``).

        Raises:
            SettingsError: the table is not named, or a number is malformed.
        """
        source = dict(environment.environ() if environ is None else environ)
        return cls(
            table=env._required(source, env.ENV_APPROVALS_TABLE),
            topic_arn=source.get(env.ENV_APPROVAL_TOPIC_ARN, "").strip() or None,
            timeout_seconds=env._int(source, env.ENV_APPROVAL_TIMEOUT_SECONDS, DEFAULT_TIMEOUT_SECONDS),
            retention_days=env._int(source, env.ENV_RETENTION_DAYS, env.DEFAULT_RETENTION_DAYS),
            api_url=source.get(env.ENV_APPROVAL_API_URL, "").strip() or None,
        )


def _attr(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, (int, float)):
        return {"N": str(value)}
    return {"S": value if isinstance(value, str) else json.dumps(value)}


def _plain(item: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in item.items():
        ((kind, raw),) = value.items()
        out[name] = (float(raw) if "." in raw else int(raw)) if kind == "N" else raw
    return out


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
    retention_days: int = env.DEFAULT_RETENTION_DAYS
    clock: Callable[[], float] = field(default=clock_now)

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

    def record_decision(self, approval_id: str, decision: Decision) -> dict[str, Any]:
        """Record ``decision`` if the request is pending and not past its deadline.

        Returns:
            The request after the update (with its token, to hand the decision to).

        Raises:
            ApprovalNotFoundError: no such request.
            ApprovalExpiredError: it timed out (it is marked expired if it was not yet).
            ApprovalAlreadyDecidedError: decided before (carries the first decision).
        """
        if not is_approval_id(approval_id):
            raise ApprovalNotFoundError(f"approval_id: no approval {approval_id[:64]!r}")
        now = self.clock()
        body = decision.model_dump(exclude_none=True)
        updated = self._update(
            approval_id,
            UpdateExpression="SET #st = :status, decision = :d, approver = :who, decided_at = :t",
            ConditionExpression="#st = :pending AND expires_at > :t",
            ExpressionAttributeNames={"#st": "status"},
            ExpressionAttributeValues={
                ":status": {"S": STATUS_OF[decision.decision]},
                ":pending": {"S": PENDING},
                ":d": {"S": json.dumps(body)},
                ":who": {"S": decision.approver},
                ":t": {"N": str(now)},
            },
        )
        if updated is not None:
            return updated
        existing = self.get(approval_id)
        if existing is None:
            raise ApprovalNotFoundError(f"approval_id: no approval {approval_id!r}")
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


# -- views -----------------------------------------------------------------------------------


def iso(epoch: Any) -> str | None:
    """Epoch seconds as ISO 8601 UTC (``2025-01-31T12:00:00Z``); None stays None."""
    if epoch is None:
        return None
    return dt.datetime.fromtimestamp(float(epoch), dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


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
        "status": status,
        "requested_at": iso(item.get("requested_at")),
        "expires_at": iso(item.get("expires_at")),
        "decision": json.loads(item["decision"]) if item.get("decision") else None,
        "approver": item.get("approver"),
        "decided_at": iso(item.get("decided_at")),
    }


# -- the operations ----------------------------------------------------------------------------


_ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")


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
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS,
    notify: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Make (or find again) the request for one tool call and park ``token`` on it.

    A retried or resumed task finds the request made before: still pending, it takes the new
    token (and deadline); already decided or expired, its decision goes to the new token at once,
    so a retry can never leave the run waiting for a decision that was already made.

    Args:
        notify: called with the request's view until one call succeeds (at least once per request);
            a failure is logged, never raised: the request stands and can be listed.

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
        "agent": agent,
        "task_token": token,
        "expires_at": expires_at,
    }
    if not table.create(approval_id, attrs) and not table.attach_token(approval_id, token, expires_at):
        existing = table.get(approval_id)
        assert existing is not None
        sfn.send_task_success(taskToken=token, output=existing.get("decision") or json.dumps(TIMEOUT_DECISION))
        return {"approval_id": approval_id, "status": "decided"}
    item = table.get(approval_id)
    if notify is not None and item is not None and not item.get("notified_at"):
        try:
            notify(view(item))
        except Exception as exc:  # noqa: BLE001 - the request stands: approvers can still list it
            _log_failed_notification(approval_id, exc)
        else:
            table.mark_notified(approval_id)
    return {"approval_id": approval_id, "status": PENDING}


def _log_failed_notification(approval_id: str, exc: Exception) -> None:
    from longstep import observability

    observability.logger().warning(
        "approval notification failed", extra={"approval_id": approval_id, "error": type(exc).__name__, "error_message": str(exc)[:500]}
    )


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


def decide(table: ApprovalTable, sfn: Any, approval_id: str, decision: Decision) -> dict[str, Any]:
    """Record ``decision`` if the request is still pending, then resume the waiting task.

    Returns:
        The request's view after the decision.

    Raises:
        ApprovalNotFoundError: no such request.
        ApprovalAlreadyDecidedError: it was decided before (carries the first decision).
        ApprovalExpiredError: it timed out first.
    """
    item = table.record_decision(approval_id, decision)
    body = decision.model_dump(exclude_none=True)
    try:
        sfn.send_task_success(taskToken=item["task_token"], output=json.dumps(body))
    except Exception as exc:  # noqa: BLE001 - sorted by Step Functions' error code below
        code = getattr(exc, "response", {}).get("Error", {}).get("Code")
        if code == _TASK_TIMED_OUT:  # the task timed out as the decision came: the model was told "timed out"
            table.expire(approval_id, late=body)
            raise ApprovalExpiredError(f"approval {approval_id} expired before the decision reached the run") from None
        if code not in _TASK_GONE:
            raise
        # Nobody waits on that token now: a retried attempt will take the recorded decision, or
        # the run's execution ended (a resumed run hands it to its new task).
    return view(item)


def expire_call(table: ApprovalTable, store: CheckpointStore, run_id: str, turn: int, call: int) -> bool:
    """Mark the request of a call expired (its task timed out); a later decision then gets 'expired'."""
    approval_id = approval_id_of(store, run_id, turn, call)
    return bool(approval_id) and table.expire(approval_id)


def notification(request_view: dict[str, Any], api_url: str | None = None) -> dict[str, Any]:
    """The SNS message telling approvers about a request (``Subject``, ``Message``, attributes).

    It carries the request's view, never its task token.
    """
    approval_id = request_view["approval_id"]
    lines = [
        f"Run {request_view['run_id']} asks to call {request_view['tool']} (turn {request_view['turn']}, call {request_view['call']}).",
        f"It waits until {request_view['expires_at']}.",
        "",
        "Arguments:",
        json.dumps(request_view["input"], indent=2, sort_keys=True),
        "",
        f"Approve:  longstep approve {approval_id}",
        f"Reject:   longstep reject {approval_id} --reason TEXT",
        f"Edit:     longstep approve {approval_id} --edit JSON",
    ]
    if api_url:
        lines.append(f"API:      POST {api_url.rstrip('/')}/approvals/{approval_id}/decision")
    subject = f"Approval needed: {request_view['tool']} in run {request_view['run_id']}"
    return {
        "Subject": subject.encode("ascii", "replace").decode()[:100],
        # Email gets the text; every other protocol (SQS, Lambda, HTTPS) gets the view as JSON.
        "Message": json.dumps({"default": json.dumps(request_view), "email": "\n".join(lines)}),
        "MessageStructure": "json",
        "MessageAttributes": {
            "run_id": {"DataType": "String", "StringValue": request_view["run_id"]},
            "tool": {"DataType": "String", "StringValue": request_view["tool"]},
        },
    }


def table_from_env(dynamodb: Any, environ: dict[str, str] | None = None) -> tuple[ApprovalTable, ApprovalSettings]:
    """The approvals table named by the environment, on ``dynamodb``, and the settings read."""
    settings = ApprovalSettings.from_env(environ)
    return ApprovalTable(settings.table, dynamodb, settings.retention_days), settings


def publisher(sns: Any, settings: ApprovalSettings) -> Callable[[dict[str, Any]], None] | None:
    """A ``notify`` for ``request`` that publishes to the settings' topic; None without a topic."""
    if not settings.topic_arn:
        return None
    topic = settings.topic_arn

    def publish(request_view: dict[str, Any]) -> None:
        sns.publish(TopicArn=topic, **notification(request_view, settings.api_url))

    return publish
