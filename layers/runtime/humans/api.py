"""The approval API over HTTP, and the EventBridge signal target.

Routes (API Gateway REST API, IAM authorization; the Powertools REST event handler):

| method and path | does | answers |
|---|---|---|
| ``GET /approvals?run_id=R&status=S`` | requests in status S (default ``pending``), one run's when R is given | 200 ``{"approvals": [...]}`` |
| ``GET /approvals/{id}`` | one request | 200, 404 |
| ``POST /approvals/{id}/decision`` | ``{"decision": "approve"\\|"reject"\\|"edit", "reason"?, "input"?, "digest"?}`` | 200, 400, 404, 409, 410 |
| ``POST /runs/{run_id}/signals/{event}[?buffer=true]`` | delivers the JSON body as the signal's payload (``buffer``: keep it for a run that starts later) | 200 ``{"outcome": ...}``, 400, 404, 409, 422 |

A 400 names the field (``{"error": "bad_request", "field": ..., "message": ...}``); a 409 carries
the first decision, or says the arguments changed since the ``digest`` the body gave
(``{"error": "stale"}``); a 410 says the request expired. A signal nobody could take is refused
(``{"error": "signal_refused", "field", "message"}``): 404 no such run, 409 the run has finished,
422 an event the run's agent does not wait on. The approver is the caller's IAM identity from
the request context (``requestContext.identity.userArn``, else ``caller``), recorded with the
decision. The work is done by ``longstep.humans.service.ApprovalService``. The approval pages
(``GET|POST /pages/decide/{link}``, ``GET /pages/inbox/{link}``: HTML for approvers in a browser,
the signed link their only credential) are routes of the same resolver: ``longstep.humans.pages``.

EventBridge delivers signals too: ``handle_signal_event`` takes events of detail-type
``Longstep Signal`` with detail ``{"run_id", "event", "payload", "buffer"?}``, checked as the
route checks them (``longstep.humans.signals.send``): a refused one fails the invocation with
its one-line reason, and lands in the dead-letter queue.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from longstep import clients
from longstep.observability.invocation import observe
from longstep.errors import (
    ApprovalAlreadyDecidedError,
    ApprovalExpiredError,
    ApprovalNotFoundError,
    ApprovalStaleError,
    ArgumentsRefusedError,
    BadRequestError,
    InvalidInputError,
    NoIdentityError,
    SignalRefusedError,
)
from longstep.humans import signals
from longstep.humans.service import MAX_EVENT_CHARS, ApprovalService, check_event_name, check_run_id
from longstep.humans.table import EXPIRED
from longstep.json_input import check_depth, parse_json
from longstep.errors import describe_validation_error
from longstep.settings import ENV_CHECKPOINT_TABLE, Settings
from longstep.store import CheckpointStore

SIGNAL_DETAIL_TYPE = "Longstep Signal"


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
        return parse_json(raw, "body")

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
        buffer = (app.current_event.query_string_parameters or {}).get("buffer") == "true"
        return service().signal(run_id, event, {} if payload is None else payload, buffer=buffer)

    # The approval pages (longstep.humans.pages) on the same function: the signed link is their
    # credential, not IAM.
    from longstep.humans import escalation_pages, pages

    pages.add_routes(app, lambda: pages.Pages(service(), pages.keys_from_env()))
    pages.add_link_routes(app, "escalation", lambda: escalation_pages.EscalationPages(service(), pages.keys_from_env()))

    @app.exception_handler(BadRequestError)
    def bad_request(exc: BadRequestError) -> Any:
        shown = {"error": "bad_request", "field": exc.field, "message": str(exc)}
        if isinstance(exc, ArgumentsRefusedError):  # an edit the tool's schema refuses: every argument's message
            shown["fields"] = {f"input.{name}": text for name, text in exc.fields.items()}
        return _json(400, shown)

    @app.exception_handler(SignalRefusedError)
    def refused(exc: SignalRefusedError) -> Any:
        shown = {"error": "signal_refused", "field": exc.field, "message": str(exc)}
        if exc.status == 404:
            shown["hint"] = "add ?buffer=true to keep the signal for a run that starts later"
        return _json(exc.status, shown)

    @app.exception_handler(NoIdentityError)
    def forbidden(exc: NoIdentityError) -> Any:
        return _json(403, {"error": "forbidden", "message": str(exc)})

    @app.exception_handler(ApprovalNotFoundError)
    def not_found(exc: ApprovalNotFoundError) -> Any:
        return _json(404, {"error": "not_found", "message": str(exc)})

    @app.exception_handler(ApprovalAlreadyDecidedError)
    def conflict(exc: ApprovalAlreadyDecidedError) -> Any:
        return _json(409, {"error": "already_decided", "message": str(exc), "status": exc.status, "decision": exc.decision})

    @app.exception_handler(ApprovalStaleError)
    def stale(exc: ApprovalStaleError) -> Any:
        return _json(409, {"error": "stale", "message": str(exc), "input_digest": exc.digest})

    @app.exception_handler(ApprovalExpiredError)
    def gone(exc: ApprovalExpiredError) -> Any:
        return _json(410, {"error": "expired", "message": str(exc), "status": EXPIRED})

    return app


def handle_http(event: Any, context: Any, resolve_agent: Callable[[str], Any]) -> dict[str, Any]:
    """The approval API Lambda: one API Gateway REST (proxy) request."""
    with observe("approval_api", {}, context) as observed:
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
    buffer: bool = False


def handle_signal_event(event: Any, context: Any, resolve_agent: Callable[[str], Any]) -> dict[str, Any]:
    """The signal Lambda: one EventBridge event of detail-type ``Longstep Signal``.

    Raises:
        InvalidInputError: the event's detail is malformed (the message names the field).
    """
    detail = event.get("detail") if isinstance(event, dict) else None
    with observe("signal", detail if isinstance(detail, dict) else {}, context) as observed:
        if not isinstance(detail, dict):
            raise InvalidInputError("detail: a JSON object {run_id, event, payload} is required")
        check_depth(detail, "detail")  # before validation: pydantic recurses over it
        try:
            parsed = SignalDetail.model_validate(detail)
        except ValidationError as exc:
            raise InvalidInputError(describe_validation_error(exc, prefix="detail.")) from None
        check_run_id(parsed.run_id, "detail.run_id")
        check_event_name(parsed.event, "detail.event")
        settings = Settings.from_env(required=(ENV_CHECKPOINT_TABLE,))
        store = CheckpointStore(settings.checkpoint_table, clients.client("dynamodb"), settings.retention_days)
        try:
            outcome = signals.send(
                store,
                clients.client("stepfunctions"),
                parsed.run_id,
                parsed.event,
                parsed.payload,
                observed.watch_agents(resolve_agent),
                buffer=parsed.buffer,
            )
        except (BadRequestError, SignalRefusedError) as exc:  # the same line the route answers, under detail.
            raise InvalidInputError(f"detail.{exc}") from None
        return observed.finished({"run_id": parsed.run_id, "event": parsed.event, "status": outcome})
