"""The approval pages: an approver decides in a browser, with a signed link as the only credential.

Routes (on the approval API, without IAM authorization: the link is the credential):

| method and path | does | answers |
|---|---|---|
| ``GET /pages/decide/{link}`` | the decision page: the call, its context, a form | 200; 410 decided or expired; 404 |
| ``POST /pages/decide/{link}`` | approve, reject (reason) or edit (arguments) | 200 decided; 400 (the field named, nothing decided); 403 bad CSRF token; 409 the arguments changed since the page was opened (nothing decided, the page again); 410; 404 |
| ``GET /pages/inbox/{link}`` | pending approvals and escalations of the link's runs or agent, oldest first | 200; 410; 404 |

Safety: opening a link never decides (GET only reads, whoever the user agent); a decision is a
POST carrying the page's CSRF token (an HMAC over the link and a per-page nonce: see
``longstep.links``); the first decision wins (``ApprovalService.decide``: a conditional update) and
later visitors see who decided and when (410); a decision is recorded with the name typed in the
form and the link's subject, ``"<name> (link to <subject>)"``. Every page carries the security
headers of ``longstep.humans.pages_html.SECURITY_HEADERS``.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import parse_qs

from longstep import keys, links
from longstep.contract.run import RunRecord
from longstep.errors import ApprovalAlreadyDecidedError, ApprovalExpiredError, ApprovalStaleError, ArgumentsRefusedError, BadRequestError
from longstep.humans import argument_form, budget_asks
from longstep.humans import decision_html
from longstep.humans import pages_html as html
from longstep.humans.requests import view
from longstep.humans.table import EXPIRED, PENDING, STATUS_OF
from longstep.json_input import parse_json
from longstep.messages import text_of
from longstep.tools.plain import risk_of, summary_of

MAX_FORM_BYTES = 64 * 1024
MAX_NAME_CHARS = 100
MAX_FORM_FIELDS = 200  # the CSRF pair, name, reason, action and one per argument


@dataclass(frozen=True)
class Page:
    """One page response: status and HTML."""

    status: int
    body: str


def approver_of(name: str, subject: str) -> str:
    """The identity recorded with a decision made through a link."""
    return f"{name} (link to {subject})"


@dataclass
class LinkPages:
    """Pages whose only credential is a signed link.

    Args:
        service: the approval API's service (``longstep.humans.service.ApprovalService``).
        keys: the link key ring.
        new_nonce: a fresh per-page nonce (tests fix it).
    """

    service: Any
    keys: links.KeyRing
    new_nonce: Callable[[], str] = lambda: secrets.token_urlsafe(16)

    @property
    def now(self) -> float:
        return self.service.approvals.clock()

    def csrf_pair(self, link: str) -> tuple[str, str]:
        """A fresh nonce and the CSRF token of a form rendered for ``link``."""
        nonce = self.new_nonce()
        return nonce, self.keys.csrf_token(link, nonce)

    def posted(self, link: str, raw_form: str | None) -> tuple[links.Capability | None, dict[str, Any], dict[str, str], Page | None]:
        """A POST's link, record and form; with the page that refuses it (a bad link, no CSRF token
        of a page rendered for ``link``: 403, or nothing left to decide: 410), else None."""
        capability, item, refused = self._open(link)
        form = parse_form(raw_form)
        if refused is not None or capability is None or item is None:
            return capability, item or {}, form, refused
        if not self.keys.check_csrf(link, form.get("nonce"), form.get("csrf")):
            return capability, item, form, Page(403, html.message_page("This form is out of date", "Nothing was done. Open the link again."))
        return capability, item, form, self._closed(item)

    def show(self, link: str) -> Page:
        """GET: the page of what the link names (reads only: a mail scanner's prefetch does nothing)."""
        capability, item, refused = self._open(link)
        if refused is not None:
            return refused
        assert capability is not None and item is not None
        return self._closed(item) or self._form(link, capability, item, 200)

    def submit(self, link: str, raw_form: str | None) -> Page:
        raise NotImplementedError  # each kind of page records its own answer

    def _open(self, link: str) -> tuple[links.Capability | None, dict[str, Any] | None, Page | None]:
        raise NotImplementedError  # each kind of page reads its own record

    def _closed(self, item: dict[str, Any]) -> Page | None:
        raise NotImplementedError

    def _form(self, link: str, capability: links.Capability, item: dict[str, Any], status: int) -> Page:
        raise NotImplementedError


@dataclass
class Pages(LinkPages):
    """What the decision and inbox routes do, apart from HTTP."""

    # -- the link -------------------------------------------------------------------------------

    def _open(self, link: str) -> tuple[links.Capability | None, dict[str, Any] | None, Page | None]:
        """The capability and approval item of a decision link, or the page that refuses it."""
        try:
            capability = self.keys.verify(link, self.now)
        except links.ExpiredLinkError as exc:
            scope = exc.capability.scope
            item = self.service.approvals.get(scope.approval) if scope.approval else None
            return None, None, Page(410, html.expired_page(view(item) if item else None))
        except links.InvalidLinkError:
            return None, None, Page(404, html.invalid_page())
        if capability.scope.approval is None:
            return None, None, Page(404, html.message_page("Not a decision link", "This link opens an inbox, not a request."))
        item = self.service.approvals.get(capability.scope.approval)
        if item is None:
            return None, None, Page(404, html.invalid_page())
        return capability, item, None

    def _closed(self, item: dict[str, Any]) -> Page | None:
        """The 410 page of a request that can no longer be decided, or None while it is pending."""
        shown = view(item, self.now)
        if shown["status"] == EXPIRED:
            return Page(410, html.expired_page(shown))
        if shown["status"] != PENDING:
            return Page(410, self._decided(item, shown, just_now=False))
        return None

    def _decided(self, item: dict[str, Any], shown: dict[str, Any], *, just_now: bool) -> str:
        if budget_asks.is_budget_ask(item):
            return decision_html.decided_page(shown, just_now=just_now, summary=f"More budget for run {shown['run_id']}", show_arguments=False)
        tool = self._tool(item)
        ran = (shown.get("decision") or {}).get("input")  # an edit: the summary of the call that ran
        summary = _summary(tool, shown if ran is None else {**shown, "input": ran})
        return decision_html.decided_page(shown, just_now=just_now, fields=fields_of_tool(tool), summary=summary)

    # -- the decision page ----------------------------------------------------------------------

    def _form(
        self,
        link: str,
        capability: links.Capability,
        item: dict[str, Any],
        status: int,
        error: dict[str, str] | None = None,
        form: dict[str, str] | None = None,
        field_errors: dict[str, str] | None = None,
    ) -> Page:
        shown = view(item, self.now)
        run = RunRecord.from_dict(self.service.store.get(item["run_id"], keys.RUN_RECORD) or {})
        reply = self.service.store.get_step(item["run_id"], keys.model_step_key(int(item["turn"])))
        tool = self._tool(item)
        nonce, csrf = self.csrf_pair(link)
        page = html.DecisionPage(
            request=shown,
            goal=run.goal,
            agent=str(item.get("agent", "")),
            summary=_summary(tool, shown),
            risk=risk_of(getattr(tool, "risk", ""), getattr(getattr(tool, "effect", None), "value", None)),
            tool_description=getattr(tool, "description", "") or "",
            model_text=text_of(reply.result["message"]) if reply is not None and not budget_asks.is_budget_ask(item) else "",
            seconds_left=float(item.get("expires_at", self.now)) - self.now,
            seconds_waited=self.now - float(item.get("requested_at", self.now)),
            nonce=nonce,
            csrf=csrf,
            subject=capability.subject,
            fields=fields_of_tool(tool),
            error=error,
            field_errors=field_errors or {},
            form=form or {},
        )
        return Page(status, html.budget_page(page) if budget_asks.is_budget_ask(item) else decision_html.decision_page(page))

    def _tool(self, item: dict[str, Any]) -> Any:
        try:
            return self.service.resolve_agent(item["agent"]).tools.get(item["tool"])
        except Exception:  # noqa: BLE001 - the page still shows the call; only the description is missing
            return None

    def submit(self, link: str, raw_form: str | None) -> Page:
        """POST: record the decision the form carries, if its CSRF token is this link's."""
        capability, item, form, refused = self.posted(link, raw_form)
        if refused is not None or capability is None:
            return refused or Page(404, html.invalid_page())
        try:
            fields = fields_of_tool(self._tool(item))
            arguments = view(item)["input"]
            body = decision_body(form, None if fields is None else argument_form.with_undeclared(fields, arguments))
            approver = approver_of(form["name"], capability.subject)
            decided = self.service.decide(item["approval_id"], body, approver)
        except ArgumentsRefusedError as exc:
            return self._form(link, capability, item, 400, None, form, exc.fields)
        except BadRequestError as exc:
            message = str(exc).split(": ", 1)[-1]
            return self._form(link, capability, item, 400, {"field": exc.field, "message": message}, form)
        except ApprovalStaleError:  # the page showed arguments the request no longer has
            fresh = self.service.approvals.get(item["approval_id"]) or item
            changed = {"field": "details", "message": "they changed since you opened this page; check them below and decide again"}
            return self._closed(fresh) or self._form(link, capability, fresh, 409, changed, {"name": form.get("name", "")})
        except (ApprovalAlreadyDecidedError, ApprovalExpiredError):
            fresh = self.service.approvals.get(item["approval_id"]) or item
            return self._closed(fresh) or Page(410, html.expired_page(view(fresh)))
        return Page(200, self._decided(item, decided, just_now=True))

    # -- the inbox ------------------------------------------------------------------------------

    def _escalation_link(self, inbox: links.Capability, escalation: dict[str, Any]) -> str:
        """A link to answer one escalation (that one: its ``times``), never outliving the inbox link."""
        scope = links.Scope(escalation=(escalation["run_id"], int(escalation["turn"]), int(escalation["step_call"]), int(escalation["times"])))
        return self.keys.sign(links.Capability(scope, inbox.expires_at, inbox.subject))

    def inbox(self, link: str) -> Page:
        """GET: the pending approvals and escalations in the link's scope, oldest first."""
        from longstep.humans import escalations

        try:
            capability = self.keys.verify(link, self.now)
        except links.ExpiredLinkError:
            return Page(410, html.expired_page(None))
        except links.InvalidLinkError:
            return Page(404, html.invalid_page())
        scope = capability.scope
        if not scope.is_inbox:
            return Page(404, html.message_page("Not an inbox link", "This link opens one request, not an inbox."))
        now = self.now
        table = self.service.approvals
        items = [i for run in scope.runs for i in table.by_status(PENDING, run)] if scope.runs else table.by_status(PENDING)
        rows = []
        for item in items:
            if not scope.covers(item) or view(item, now)["status"] != PENDING:
                continue
            expires = float(item["expires_at"])
            child = links.Capability(links.Scope(approval=item["approval_id"]), int(min(capability.expires_at, expires)), capability.subject)
            rows.append(
                {
                    "run_id": item["run_id"],
                    # What is asked, in the tool's words (its summary of the call).
                    "tool": f"budget: {budget_asks.question_of(item)}" if budget_asks.is_budget_ask(item) else _summary(self._tool(item), view(item)),
                    "requested": float(item["requested_at"]),
                    "expires": expires,
                    "href": f"../decide/{self.keys.sign(child)}",
                }
            )
        # Escalations live in the runs' logs (no index by agent): an agent's inbox lists its approvals.
        pending = [
            {**e, "requested": float(e["requested_at"]), "href": f"../escalation/{self._escalation_link(capability, e)}"}
            for run in scope.runs
            for e in escalations.pending_escalations(self.service.store, run)
        ]
        rows.sort(key=lambda r: r["requested"])
        pending.sort(key=lambda e: e["requested"])
        return Page(200, html.inbox_page(capability.subject, rows, pending, now))


def fields_of_tool(tool: Any) -> list[argument_form.FormField] | None:
    """The form of the tool's arguments; None when the tool (or its schema) cannot be read."""
    try:
        return argument_form.fields_of(tool.args_model.model_json_schema()) if tool is not None else None
    except Exception:  # noqa: BLE001 - a schema pydantic cannot write: the arguments are edited as JSON
        return None


def _summary(tool: Any, shown: dict[str, Any]) -> str:
    """What the call does, in the tool's words (its name when the tool cannot be read)."""
    if tool is None:
        return f"Run {shown['tool']}"
    return summary_of(tool.summary, tool.description, shown["input"]) or f"Run {shown['tool']}"


def parse_form(raw: str | None) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` body: the first value of each field (nothing, for a
    body too large or with too many fields: the CSRF check then refuses it)."""
    if not raw or len(raw) > MAX_FORM_BYTES:
        return {}
    try:
        return {k: v[0] for k, v in parse_qs(raw, keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS).items()}
    except ValueError:  # more fields than any page's form has
        return {}


def checked_name(form: dict[str, str]) -> str:
    """The name typed in the form (trimmed, and kept trimmed in ``form``).

    Raises:
        BadRequestError: no name, or a longer one than ``MAX_NAME_CHARS``.
    """
    name = form.get("name", "").strip()
    if not name or len(name) > MAX_NAME_CHARS:
        raise BadRequestError("name", f"your name is required (1-{MAX_NAME_CHARS} characters)")
    form["name"] = name
    return name


def decision_body(form: dict[str, str], fields: list[argument_form.FormField] | None = None) -> dict[str, Any]:
    """The decision body (as the JSON API takes it) from the page's form: an edit's arguments from
    the form's argument fields, or from its JSON box when the tool's schema could not be read.

    Raises:
        BadRequestError: the name is missing, the action unknown, or the arguments not a JSON object.
        ArgumentsRefusedError: argument fields that could not be read (a word in a number field).
    """
    checked_name(form)
    action = form.get("action")
    if action not in STATUS_OF:
        raise BadRequestError("action", "choose approve, reject or edit")
    body: dict[str, Any] = {"decision": action}
    if form.get("digest"):  # the arguments the page showed: refused if they changed since
        body["digest"] = form["digest"]
    if action == "reject":
        body["reason"] = form.get("reason", "").strip()
    if action == "edit" and fields is not None and "arguments" not in form:
        arguments, errors = argument_form.arguments_from(fields, form)
        if errors:
            raise ArgumentsRefusedError(errors)
        body["input"] = arguments
    elif action == "edit":
        arguments = parse_json(form.get("arguments", ""), "arguments")
        if not isinstance(arguments, dict):
            raise BadRequestError("arguments", "must be a JSON object")
        body["input"] = arguments
    return body


def keys_from_env() -> links.KeyRing:
    """The link key ring of the secret the function's environment names (cached for a few minutes).

    Raises:
        LinkKeyError: no secret is configured, or it cannot be read.
    """
    from longstep import clients, environment

    secret_id = environment.get(links.ENV_LINK_KEY_SECRET).strip()
    if not secret_id:
        raise links.LinkKeyError(f"link key: {links.ENV_LINK_KEY_SECRET} is not set")
    return links.KEYS.get(clients.client("secretsmanager"), secret_id)


def respond(page: Page) -> Any:
    """A page as the Powertools response, with the security headers."""
    from aws_lambda_powertools.event_handler import Response

    return Response(status_code=page.status, content_type=html.CONTENT_TYPE, body=page.body, headers=dict(html.SECURITY_HEADERS))


def add_link_routes(app: Any, route: str, pages: Callable[[], LinkPages]) -> None:
    """``GET /pages/<route>/{link}`` shows the page, ``POST`` submits its form; ``pages`` is called
    once per request."""

    @app.get(f"/pages/{route}/<link>")
    def show(link: str) -> Any:
        return respond(pages().show(link))

    @app.post(f"/pages/{route}/<link>")
    def submit(link: str) -> Any:
        return respond(pages().submit(link, app.current_event.decoded_body))


def add_routes(app: Any, pages: Callable[[], Pages]) -> None:
    """Register the page routes on a Powertools REST resolver; ``pages`` is called once per request."""

    @app.exception_handler(links.LinkKeyError)
    def no_key(exc: links.LinkKeyError) -> Any:
        from longstep.observability import logs

        logs.logger().error("approval pages unavailable", extra={"error": str(exc)})
        return respond(Page(503, html.message_page("Approval pages unavailable", "Try again later, or use the CLI.")))

    add_link_routes(app, "decide", pages)

    @app.get("/pages/inbox/<link>")
    def inbox(link: str) -> Any:
        return respond(pages().inbox(link))
