"""The approval API's service layer: list, read and decide approval requests, send signals to runs.

The HTTP routes (``longstep.humans.api``) and the CLI call the same methods. Every answer is
built from ``longstep.humans.requests.view``: no response ever carries a task token.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from longstep import clients
from longstep.errors import ApprovalAlreadyDecidedError, ApprovalExpiredError, ApprovalNotFoundError, BadRequestError
from longstep.errors import ApprovalStaleError, ArgumentsRefusedError
from longstep.humans import argument_form, budget_asks, decisions, requests, signals
from longstep.humans.decisions import Decision
from longstep.humans.table import EXPIRED, PENDING, STATUS_OF, STATUSES, ApprovalTable, is_approval_id
from longstep.inputs import RUN_ID_PATTERN, RUN_ID_RULE
from longstep.settings import ENV_APPROVALS_TABLE, ENV_CHECKPOINT_TABLE, Settings
from longstep.store import CheckpointStore

MAX_EVENT_CHARS = 128  # as a wait_for event name (longstep.contract.call.CallItem.event)
EVENT_NAME = re.compile(rf"[A-Za-z0-9_.:-]{{1,{MAX_EVENT_CHARS}}}")
MAX_REASON_CHARS = 2_000


class DecisionBody(BaseModel):
    """The body of ``POST /approvals/{id}/decision``."""

    model_config = ConfigDict(extra="forbid")

    decision: str
    reason: str | None = Field(default=None, max_length=MAX_REASON_CHARS)
    input: dict[str, Any] | None = None
    digest: str | None = Field(default=None, max_length=100)  # the request's input_digest as the approver saw it


def parse_decision(body: Any, approver: str) -> tuple[Decision, str | None]:
    """Validate a decision body; the approver comes from the request, never from the body.

    Returns:
        The decision, and the digest of the arguments the approver saw (None when not given).

    Raises:
        BadRequestError: naming the first bad field.
    """
    if not isinstance(body, dict):
        raise BadRequestError("body", "must be a JSON object")
    try:
        parsed = DecisionBody.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "body"
        raise BadRequestError(field, first["msg"]) from None
    if parsed.decision not in STATUS_OF:
        raise BadRequestError("decision", f"must be one of {', '.join(STATUS_OF)}, got {parsed.decision!r}")
    if parsed.decision == "reject" and not (parsed.reason or "").strip():
        raise BadRequestError("reason", "a reason is required to reject")
    if parsed.decision == "edit" and parsed.input is None:
        raise BadRequestError("input", "the new arguments (a JSON object) are required to edit")
    if parsed.decision != "edit" and parsed.input is not None:
        raise BadRequestError("input", "only an edit carries new arguments")
    return Decision(decision=parsed.decision, reason=parsed.reason, input=parsed.input, approver=approver), parsed.digest


def check_run_id(run_id: Any, field: str = "run_id") -> str:
    if not isinstance(run_id, str) or not RUN_ID_PATTERN.fullmatch(run_id):
        raise BadRequestError(field, RUN_ID_RULE)
    return run_id


def check_event_name(event: Any, field: str = "event") -> str:
    # The names a ``wait_for`` can wait on (``WaitForArgs.event``): a signal for any other could
    # never be taken.
    if not isinstance(event, str) or not EVENT_NAME.fullmatch(event):
        raise BadRequestError(field, f"must be 1-{MAX_EVENT_CHARS} of A-Z a-z 0-9 _ . : -")
    return event


@dataclass
class ApprovalService:
    """What the API does, apart from HTTP: the CLI calls the same methods.

    Args:
        approvals: the approvals table.
        store: the checkpoint table (signals live there).
        sfn: a Step Functions client (decisions and signals resume task tokens).
        resolve_agent: finds an agent by name, for the tool schema an edit is checked against.
    """

    approvals: ApprovalTable
    store: CheckpointStore
    sfn: Any
    resolve_agent: Callable[[str], Any]

    @classmethod
    def from_settings(cls, settings: Settings, resolve_agent: Callable[[str], Any], dynamodb: Any, sfn: Any) -> "ApprovalService":
        """The service on the tables ``settings`` name, with the given clients."""
        table = ApprovalTable.from_settings(settings, dynamodb)
        return cls(table, CheckpointStore(settings.checkpoint_table, dynamodb, settings.retention_days), sfn, resolve_agent)

    @classmethod
    def from_env(cls, resolve_agent: Callable[[str], Any], environ: dict[str, str] | None = None) -> "ApprovalService":
        """The service on the tables the function's environment names, with the process's clients."""
        settings = Settings.from_env(environ, required=(ENV_CHECKPOINT_TABLE, ENV_APPROVALS_TABLE))
        return cls.from_settings(settings, resolve_agent, clients.client("dynamodb"), clients.client("stepfunctions"))

    def list(self, run_id: str | None = None, status: str | None = None) -> list[dict[str, Any]]:
        """Requests in ``status`` (default pending), one run's when ``run_id`` is given."""
        if run_id is not None:
            check_run_id(run_id)
        status = status or PENDING
        if status not in STATUSES:
            raise BadRequestError("status", f"must be one of {', '.join(STATUSES)}, got {status!r}")
        return requests.list_approvals(self.approvals, status, run_id)

    def get(self, approval_id: str) -> dict[str, Any]:
        return requests.get_approval(self.approvals, approval_id)

    def decide(self, approval_id: str, body: Any, approver: str) -> dict[str, Any]:
        """Validate and record a decision, then resume the run.

        The decision is bound to the digest of the arguments it decides on (an edit's, else the
        request's): CallTool runs the call only with arguments of that digest. A body carrying
        ``digest`` (the request's ``input_digest`` as the approver saw it) is refused when the
        request's arguments have changed since.

        Raises:
            BadRequestError: a malformed body, or edited arguments the tool's schema refuses.
            ApprovalNotFoundError, ApprovalAlreadyDecidedError, ApprovalExpiredError.
            ApprovalStaleError: the request's arguments are no longer those the approver saw.
        """
        decision, seen = parse_decision(body, approver)
        current = self.approvals.get(approval_id) if is_approval_id(approval_id) else None
        if current is None:
            raise ApprovalNotFoundError(f"approval_id: no approval {approval_id[:64]!r}")
        shown = requests.view(current, self.approvals.clock())
        if shown["status"] == EXPIRED:
            if current["status"] == PENDING:  # past its deadline: its task has timed out
                self.approvals.expire(approval_id)
            raise ApprovalExpiredError(f"approval {approval_id} expired at {shown['expires_at']}")
        if shown["status"] != PENDING:
            raise ApprovalAlreadyDecidedError(f"approval {approval_id} was already {shown['status']}", shown["decision"] or {}, shown["status"])
        now_digest = current.get("input_digest")
        if seen is not None and now_digest is not None and seen != now_digest:
            raise ApprovalStaleError(f"approval {approval_id}: its arguments changed since they were shown; nothing was decided", now_digest)
        if budget_asks.is_budget_ask(current):  # the run's ask for more budget: no task token waits on it
            return budget_asks.decide(self.approvals, self.store, approval_id, decision)
        if decision.decision == "edit":
            self._check_arguments(current, decision.input or {})
        # The update is conditional on the digest read here: arguments changed in between refuse it.
        return decisions.decide(self.approvals, self.sfn, approval_id, decisions.bind(decision, current), now_digest)

    def _check_arguments(self, request: dict[str, Any], arguments: dict[str, Any]) -> None:
        tool = self.resolve_agent(request["agent"]).tools.get(request["tool"])
        try:
            tool.args_model.model_validate(arguments)
        except ValidationError as exc:
            fields = argument_form.fields_of(tool.args_model.model_json_schema())
            raise ArgumentsRefusedError(argument_form.plain_errors(exc, fields)) from None

    def signal(self, run_id: str, event: str, payload: Any, buffer: bool = False) -> dict[str, Any]:
        """Send a signal: to the run's waiting ``wait_for`` if it matches, else kept, in order, for
        the next one that does (``longstep.humans.signals.send``).

        Args:
            buffer: keep it for a run that does not exist yet.

        Returns:
            ``run_id``, ``event`` and ``outcome`` (``delivered`` or ``buffered``).

        Raises:
            BadRequestError: a malformed run id, event name or payload (the field is named).
            SignalRefusedError: no such run, a finished run, an event the run never waits on.
        """
        check_run_id(run_id)
        check_event_name(event)
        if not isinstance(payload, dict):
            raise BadRequestError("payload", "must be a JSON object")
        outcome = signals.send(self.store, self.sfn, run_id, event, payload, self.resolve_agent, buffer=buffer)
        return {"run_id": run_id, "event": event, "outcome": outcome}
