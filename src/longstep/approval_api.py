"""The approval API: humans list, read and decide approval requests, and send signals to runs.

Routes (API Gateway REST API, IAM authorization; the Powertools REST event handler):

| method and path | does | answers |
|---|---|---|
| ``GET /approvals?run_id=R&status=S`` | requests in status S (default ``pending``), one run's when R is given | 200 ``{"approvals": [...]}`` |
| ``GET /approvals/{id}`` | one request | 200, 404 |
| ``POST /approvals/{id}/decision`` | ``{"decision": "approve"\\|"reject"\\|"edit", "reason"?, "input"?}`` | 200, 400, 404, 409, 410 |
| ``POST /runs/{run_id}/signals/{event}`` | delivers the JSON body as the signal's payload | 200 ``{"outcome": ...}``, 400 |

A 400 names the field (``{"error": "bad_request", "field": ..., "message": ...}``); a 409 carries
the first decision; a 410 says the request expired. The approver is the caller's IAM identity from
the request context (``requestContext.identity.userArn``, else ``caller``), recorded with the
decision. No response ever carries a task token: every one is built from ``approvals.view``.

EventBridge delivers signals too: ``handle_signal_event`` takes events of detail-type
``Longstep Signal`` with detail ``{"run_id", "event", "payload"}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from longstep import environment
from longstep import approvals, clients, observability, signals
from longstep import settings as env
from longstep.errors import InvalidInputError, LongstepError
from longstep.inputs import RUN_ID_PATTERN, RUN_ID_RULE, describe_validation_error
from longstep.store import CheckpointStore

SIGNAL_DETAIL_TYPE = "Longstep Signal"
MAX_EVENT_CHARS = 128  # as a wait_for event name (longstep.inputs.ToolCallItem.event)
MAX_REASON_CHARS = 2_000


class BadRequestError(InvalidInputError):
    """A malformed request; ``field`` names what is wrong."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class NoIdentityError(LongstepError):
    """The request carries no caller identity (the method is not IAM-authorized)."""


class DecisionBody(BaseModel):
    """The body of ``POST /approvals/{id}/decision``."""

    model_config = ConfigDict(extra="forbid")

    decision: str
    reason: str | None = Field(default=None, max_length=MAX_REASON_CHARS)
    input: dict[str, Any] | None = None


def parse_decision(body: Any, approver: str) -> approvals.Decision:
    """Validate a decision body; the approver comes from the request, never from the body.

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
    if parsed.decision not in approvals.STATUS_OF:
        raise BadRequestError("decision", f"must be one of {', '.join(approvals.STATUS_OF)}, got {parsed.decision!r}")
    if parsed.decision == "reject" and not (parsed.reason or "").strip():
        raise BadRequestError("reason", "a reason is required to reject")
    if parsed.decision == "edit" and parsed.input is None:
        raise BadRequestError("input", "the new arguments (a JSON object) are required to edit")
    if parsed.decision != "edit" and parsed.input is not None:
        raise BadRequestError("input", "only an edit carries new arguments")
    return approvals.Decision(decision=parsed.decision, reason=parsed.reason, input=parsed.input, approver=approver)


def check_run_id(run_id: Any, field: str = "run_id") -> str:
    if not isinstance(run_id, str) or not RUN_ID_PATTERN.fullmatch(run_id):
        raise BadRequestError(field, RUN_ID_RULE)
    return run_id


def check_event_name(event: Any, field: str = "event") -> str:
    if not isinstance(event, str) or not 1 <= len(event) <= MAX_EVENT_CHARS:
        raise BadRequestError(field, f"must be 1-{MAX_EVENT_CHARS} characters")
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

    approvals: approvals.ApprovalTable
    store: CheckpointStore
    sfn: Any
    resolve_agent: Callable[[str], Any]

    @classmethod
    def from_env(cls, resolve_agent: Callable[[str], Any], environ: dict[str, str] | None = None) -> "ApprovalService":
        """The service on the tables the function's environment names, with the process's clients."""
        source = dict(environment.environ() if environ is None else environ)
        ddb = clients.client("dynamodb")
        table, settings = approvals.table_from_env(ddb, source)
        store = CheckpointStore(env._required(source, env.ENV_CHECKPOINT_TABLE), ddb, settings.retention_days)
        return cls(table, store, clients.client("stepfunctions"), resolve_agent)

    def list(self, run_id: str | None = None, status: str | None = None) -> list[dict[str, Any]]:
        """Requests in ``status`` (default pending), one run's when ``run_id`` is given."""
        if run_id is not None:
            check_run_id(run_id)
        status = status or approvals.PENDING
        if status not in approvals.STATUSES:
            raise BadRequestError("status", f"must be one of {', '.join(approvals.STATUSES)}, got {status!r}")
        return approvals.list_approvals(self.approvals, status, run_id)

    def get(self, approval_id: str) -> dict[str, Any]:
        return approvals.get_approval(self.approvals, approval_id)

    def decide(self, approval_id: str, body: Any, approver: str) -> dict[str, Any]:
        """Validate and record a decision, then resume the run.

        Raises:
            BadRequestError: a malformed body, or edited arguments the tool's schema refuses.
            approvals.ApprovalNotFoundError, ApprovalAlreadyDecidedError, ApprovalExpiredError.
        """
        decision = parse_decision(body, approver)
        current = self.approvals.get(approval_id) if approvals.is_approval_id(approval_id) else None
        if current is None:
            raise approvals.ApprovalNotFoundError(f"approval_id: no approval {approval_id[:64]!r}")
        shown = approvals.view(current, self.approvals.clock())
        if shown["status"] == approvals.EXPIRED:
            if current["status"] == approvals.PENDING:  # past its deadline: its task has timed out
                self.approvals.expire(approval_id)
            raise approvals.ApprovalExpiredError(f"approval {approval_id} expired at {shown['expires_at']}")
        if shown["status"] != approvals.PENDING:
            raise approvals.ApprovalAlreadyDecidedError(
                f"approval {approval_id} was already {shown['status']}", shown["decision"] or {}, shown["status"]
            )
        if decision.decision == "edit":
            self._check_arguments(current, decision.input or {})
        return approvals.decide(self.approvals, self.sfn, approval_id, decision)

    def _check_arguments(self, request: dict[str, Any], arguments: dict[str, Any]) -> None:
        tool = self.resolve_agent(request["agent"]).tools.get(request["tool"])
        try:
            tool.args_model.model_validate(arguments)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(["input", *(str(p) for p in first["loc"])])
            raise BadRequestError(field, f"{first['msg']} (the arguments of {tool.name}: {describe_validation_error(exc)})") from None

    def signal(self, run_id: str, event: str, payload: Any) -> dict[str, Any]:
        """Deliver a signal: to the run's waiting ``wait_for`` if it matches, else kept for the next one.

        Returns:
            ``run_id``, ``event`` and ``outcome`` (``delivered``, ``buffered`` or ``ignored``).
        """
        check_run_id(run_id)
        check_event_name(event)
        if not isinstance(payload, dict):
            raise BadRequestError("payload", "must be a JSON object")
        outcome = signals.deliver(self.store, self.sfn, run_id, event, payload)
        return {"run_id": run_id, "event": event, "outcome": outcome}


# -- HTTP ----------------------------------------------------------------------------------------


def _json(status: int, body: Any) -> Any:
    from aws_lambda_powertools.event_handler import Response, content_types

    return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=json.dumps(body))


def build_resolver(service: Callable[[], ApprovalService]) -> Any:
    """The Powertools REST resolver with the API's routes; ``service`` is called once per request."""
    from aws_lambda_powertools.event_handler import APIGatewayRestResolver

    app = APIGatewayRestResolver()

    def body() -> Any:
        raw = app.current_event.decoded_body
        if raw is None or not raw.strip():
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise BadRequestError("body", "is not valid JSON") from None

    def approver() -> str:
        identity = app.current_event.request_context.identity
        who = identity.user_arn or identity.caller
        if not who:
            raise NoIdentityError("the request carries no caller identity: the method must use IAM authorization")
        return who

    @app.get("/approvals")
    def list_approvals() -> Any:
        params = app.current_event.query_string_parameters or {}
        return {"approvals": service().list(params.get("run_id"), params.get("status"))}

    @app.get("/approvals/<approval_id>")
    def get_approval(approval_id: str) -> Any:
        return service().get(approval_id)

    @app.post("/approvals/<approval_id>/decision")
    def decide(approval_id: str) -> Any:
        return service().decide(approval_id, body(), approver())

    @app.post("/runs/<run_id>/signals/<event>")
    def signal(run_id: str, event: str) -> Any:
        payload = body()
        return service().signal(run_id, event, {} if payload is None else payload)

    @app.exception_handler(BadRequestError)
    def bad_request(exc: BadRequestError) -> Any:
        return _json(400, {"error": "bad_request", "field": exc.field, "message": str(exc)})

    @app.exception_handler(NoIdentityError)
    def forbidden(exc: NoIdentityError) -> Any:
        return _json(403, {"error": "forbidden", "message": str(exc)})

    @app.exception_handler(approvals.ApprovalNotFoundError)
    def not_found(exc: approvals.ApprovalNotFoundError) -> Any:
        return _json(404, {"error": "not_found", "message": str(exc)})

    @app.exception_handler(approvals.ApprovalAlreadyDecidedError)
    def conflict(exc: approvals.ApprovalAlreadyDecidedError) -> Any:
        return _json(409, {"error": "already_decided", "message": str(exc), "status": exc.status, "decision": exc.decision})

    @app.exception_handler(approvals.ApprovalExpiredError)
    def gone(exc: approvals.ApprovalExpiredError) -> Any:
        return _json(410, {"error": "expired", "message": str(exc), "status": approvals.EXPIRED})

    return app


def handle_http(event: Any, context: Any, resolve_agent: Callable[[str], Any]) -> dict[str, Any]:
    """The approval API Lambda: one API Gateway REST (proxy) request."""
    with observability.invocation("approval_api", {}, context) as observed:
        holder: dict[str, ApprovalService] = {}

        def service() -> ApprovalService:
            if "service" not in holder:
                holder["service"] = ApprovalService.from_env(observed.watch_agents(resolve_agent))
            return holder["service"]

        response = build_resolver(service).resolve(event, context)
        observed.finished({"status": str(response.get("statusCode"))})
        return response


class SignalDetail(BaseModel):
    """The detail of a ``Longstep Signal`` EventBridge event."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    event: str = Field(min_length=1, max_length=MAX_EVENT_CHARS)
    payload: dict[str, Any] = Field(default_factory=dict)


def handle_signal_event(event: Any, context: Any, resolve_agent: Callable[[str], Any]) -> dict[str, Any]:
    """The signal Lambda: one EventBridge event of detail-type ``Longstep Signal``.

    Raises:
        InvalidInputError: the event's detail is malformed (the message names the field).
    """
    detail = event.get("detail") if isinstance(event, dict) else None
    with observability.invocation("signal", detail if isinstance(detail, dict) else {}, context) as observed:
        if not isinstance(detail, dict):
            raise InvalidInputError("detail: a JSON object {run_id, event, payload} is required")
        try:
            parsed = SignalDetail.model_validate(detail)
        except ValidationError as exc:
            raise InvalidInputError(describe_validation_error(exc, prefix="detail.")) from None
        check_run_id(parsed.run_id, "detail.run_id")
        environ = dict(environment.environ())
        retention = env._int(environ, env.ENV_RETENTION_DAYS, env.DEFAULT_RETENTION_DAYS)
        store = CheckpointStore(env._required(environ, env.ENV_CHECKPOINT_TABLE), clients.client("dynamodb"), retention)
        outcome = signals.deliver(store, clients.client("stepfunctions"), parsed.run_id, parsed.event, parsed.payload)
        return observed.finished({"run_id": parsed.run_id, "event": parsed.event, "status": outcome})

