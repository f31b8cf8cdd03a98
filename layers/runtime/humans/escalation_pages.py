"""The escalation page: a person answers, in a browser, a step that cannot go on by itself.

Routes (on the approval API, without IAM authorization: the signed link is the credential):

| method and path | does | answers |
|---|---|---|
| ``GET /pages/escalation/{link}`` | what failed, in plain words, and what each answer does | 200; 410 answered or expired; 404 |
| ``POST /pages/escalation/{link}`` | try again, provide the result, or stop the run | 200 answered; 400 (the field named, nothing answered); 403 bad CSRF token; 410; 404 |

The same safety as the decision page (``longstep.humans.pages``): opening a link never answers;
an answer is a POST carrying the page's CSRF token; the first answer wins (``waiting.resolve``,
a conditional update) and later visitors see who answered and how (410); the answerer is recorded
as ``"<name> (link to <subject>)"``. A link names one escalation of one step (its ``times``): when
the same step escalates again later, the old link answers nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from html import escape
from typing import Any

from longstep import keys, links
from longstep.errors import AlreadyDecidedError, BadRequestError, WaitClosedError, WaitNotFoundError
from longstep.humans import escalations, waiting
from longstep.humans.decision_html import arguments_html
from longstep.humans import pages_html as html
from longstep.humans.pages import LinkPages, Page, approver_of, checked_name, fields_of_tool

OUTCOME_UNKNOWN = "OutcomeUnknownError"  # an at-most-once call interrupted after it may have acted
_STEPS = {
    "ModelTurn": "The agent's model could not reply",
    "Init": "The run could not start",
    "Finish": "The run could not finish",
    "ContinueAsNew": "The run could not go on into its next part",
}
# The problem's name in plain words (the technical name is shown beside it).
_PROBLEMS = {
    OUTCOME_UNKNOWN: "nobody knows whether it happened: the run was interrupted while it ran",
    "States.Timeout": "it took longer than it may",
    "PermanentError": "it failed in a way that trying again the same way will not fix",
    "ModelAccessError": "the model service refused the request (access, quota or configuration)",
}
_ANSWERED = {"retry": "Tried again", "skip": "Result provided", "abort": "Run stopped"}


@dataclass
class EscalationPages(LinkPages):
    """What the escalation routes do, apart from HTTP."""

    def _open(self, link: str) -> tuple[links.Capability | None, dict[str, Any] | None, Page | None]:
        """The capability and escalation record of a link, or the page that refuses it."""
        try:
            capability = self.keys.verify(link, self.now)
        except links.ExpiredLinkError:
            return None, None, Page(410, html.expired_page(None))
        except links.InvalidLinkError:
            return None, None, Page(404, html.invalid_page())
        if capability.scope.escalation is None:
            return None, None, Page(404, html.message_page("Not an escalation link", "This link opens something else."))
        run_id, turn, call, times = capability.scope.escalation
        record = self.service.store.get(run_id, keys.escalation_key(turn, call))
        if record is None:
            return None, None, Page(404, html.invalid_page())
        record = {**record, "run_id": run_id, "turn": turn, "call": call, "sk": keys.escalation_key(turn, call)}
        if int(record.get("times", 1)) != times:  # the step escalated again since: that one needs its own link
            return None, None, Page(410, html.message_page("This was answered", "The step has been answered and went on since."))
        return capability, record, None

    def _closed(self, record: dict[str, Any]) -> Page | None:
        if record.get("status") == waiting.PENDING:
            return None
        if record.get("status") == waiting.CLOSED:
            return Page(410, html.message_page("This wait is over", "The run stopped waiting for this answer; nothing was answered."))
        return Page(410, answered_page(record, json.loads(record.get("decision") or "{}"), just_now=False))

    def _form(
        self, link: str, capability: links.Capability, item: dict[str, Any], status: int, refusal: tuple[dict[str, str], dict[str, str]] | None = None
    ) -> Page:
        """The page's form (``refusal``: the error and the posted form of a refused answer)."""
        record = item
        error, form = refusal or (None, {})
        nonce, csrf = self.csrf_pair(link)
        tool = self._tool(record)
        shown = {
            "title": self._title(record, tool),
            "fields": fields_of_tool(tool),
            "waited": self.now - float(record.get("requested_at", self.now)),
            "nonce": nonce,
            "csrf": csrf,
            "subject": capability.subject,
        }
        return Page(status, escalation_page(record, shown, error, form or {}))

    def _tool(self, record: dict[str, Any]) -> Any:
        """The escalated call's tool, or None (not a call, or its agent cannot be loaded)."""
        if not record.get("tool"):
            return None
        try:
            run = self.service.store.get(record["run_id"], keys.RUN_RECORD) or {}
            return self.service.resolve_agent(run["agent"]).tools.get(record["tool"])
        except Exception:  # noqa: BLE001 - the page still shows the step; only the tool's own words are missing
            return None

    def _title(self, record: dict[str, Any], tool: Any) -> str:
        task = str(record.get("task", ""))
        if task in _STEPS:
            return _STEPS[task]
        arguments = json.loads(record["input"]) if record.get("input") else {}
        summary = tool.summary_of(arguments) if tool is not None else f"Run {record.get('tool')}"
        if record.get("error") == OUTCOME_UNKNOWN:
            return f"Did this happen? {summary}"
        return f"This could not be done: {summary}"

    def submit(self, link: str, raw_form: str | None) -> Page:
        """POST: record the answer the form carries, if its CSRF token is this link's."""
        capability, record, form, refused = self.posted(link, raw_form)
        if refused is not None or capability is None:
            return refused or Page(404, html.invalid_page())
        try:
            resolution = resolution_of(form, record, approver_of(checked_name(form), capability.subject))
            escalations.resolve_at(self.service.store, self.service.sfn, record["run_id"], record["sk"], resolution)
        except BadRequestError as exc:
            message = str(exc).split(": ", 1)[-1]
            return self._form(link, capability, record, 400, ({"field": exc.field, "message": message}, form))
        except (AlreadyDecidedError, WaitClosedError, WaitNotFoundError):
            fresh = self.service.store.get(record["run_id"], record["sk"]) or record
            return self._closed({**record, **fresh}) or Page(410, html.expired_page(None))
        return Page(200, answered_page(record, resolution.model_dump(exclude_none=True), just_now=True))


def can_provide_result(record: dict[str, Any]) -> bool:
    """Whether the step has a result a person could give (a tool call's or a model turn's)."""
    return record.get("task") not in escalations.NO_SKIP_STEPS


def resolution_of(form: dict[str, str], record: dict[str, Any], resolver: str) -> escalations.Resolution:
    """The answer a posted form carries.

    Raises:
        BadRequestError: an unknown action, or a result missing or not allowed (the field named).
    """
    action = form.get("action")
    if action not in ("retry", "skip", "abort"):
        raise BadRequestError("action", "choose try again, provide the result, or stop the run")
    if action != "skip":
        happened = False if action == "retry" and record.get("error") == OUTCOME_UNKNOWN else None
        return escalations.Resolution(action=action, happened=happened, resolver=resolver)
    if not can_provide_result(record):
        raise BadRequestError("action", f"{record.get('task')} has no result to provide: try again or stop the run")
    text = form.get("result", "").replace("\r\n", "\n").strip()
    if not text:
        raise BadRequestError("result", "type the result the agent should be given")
    if record.get("task") == "ModelTurn":
        return escalations.Resolution(action="skip", result=text, resolver=resolver)  # a model turn's result is its reply text
    try:
        result: Any = json.loads(text)
    except ValueError:
        result = text  # plain words are a text result
    return escalations.Resolution(action="skip", result=result, resolver=resolver)


def _choices(record: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(action, button, class, what it does) for the step."""
    unknown = record.get("error") == OUTCOME_UNKNOWN
    retry = (
        ("retry", "It did not happen: do it now", "", "Only if you checked that it did not happen: it runs once, now.")
        if unknown
        else ("retry", "Try again", "primary", "The step runs again now.")
    )
    provide = (
        "skip",
        "It happened: use this result" if unknown else "Provide the result",
        "primary" if unknown else "",
        "The step does not run again; the agent is given the result you type, as if the step had returned it.",
    )
    stop = ("abort", "Stop the run", "danger", "The run stops now, as failed; nothing else runs.")
    return [retry, *([provide] if can_provide_result(record) else []), stop]


def escalation_page(record: dict[str, Any], shown: dict[str, Any], error: dict[str, str] | None, form: dict[str, str]) -> str:
    """The escalation page: what failed, in plain words, the step's details, and the answers."""
    call = int(record["call"])
    error_name = str(record.get("error", ""))
    problem = f"{_PROBLEMS.get(error_name, 'it failed')} (technical name: {error_name})"
    if int(record.get("times", 1)) > 1:
        problem += f"; this step has needed a person {record.get('times')} times"
    details = f"<h2>The action's details</h2>{arguments_html(json.loads(record['input']), shown['fields'])}" if record.get("input") else ""
    refused = (
        f'<p class="error" role="alert" id="error">Nothing was answered. {escape(error["field"])}: {escape(error["message"])}</p>' if error else ""
    )
    choices = _choices(record)
    listed = "".join(f"<li><strong>{escape(label)}</strong>: {escape(what)}</li>" for _, label, _, what in choices)
    result_box = ""
    if can_provide_result(record):
        hint = "the text of the reply" if record.get("task") == "ModelTurn" else "text, or JSON for structured data"
        result_box = (
            f'<label for="result">The result (for "{escape(choices[1][1])}": {hint})</label>'
            f'<textarea id="result" name="result" rows="4">{escape(form.get("result", ""))}</textarea>'
        )
    buttons = "".join(
        f'<button type="submit"{f" class={c!r}" if c else ""} name="action" value="{a}" id="{a}">{escape(label)}</button>'
        for a, label, c, _ in choices
    )
    body = f"""
<p class="note">A step needs you</p>
<h1 id="summary">{escape(shown["title"])}</h1>
{refused}
<p class="risk" id="reason"><strong>What went wrong:</strong> {escape(str(record.get("reason", ""))[:2000])}</p>
{details}
<h2>Where</h2>
<dl id="context">
<dt>Waiting since</dt><dd id="requested">{escape(html.when(float(record.get("requested_at", 0))))} ({escape(html.duration(shown["waited"]))})</dd>
<dt>Run</dt><dd id="run">{escape(record["run_id"])} (step {record["turn"]}{f", action {call + 1}" if call >= 0 else ""})</dd>
<dt>Problem</dt><dd id="error-kind">{escape(problem)}</dd>
</dl>
<h2>Your answer</h2>
<ul class="note" id="choices">{listed}</ul>
<form method="post" action="">
<input type="hidden" name="nonce" value="{escape(shown["nonce"])}">
<input type="hidden" name="csrf" value="{escape(shown["csrf"])}">
<label for="name">Your name (recorded with the answer, with this link's recipient {escape(shown["subject"])})</label>
<input type="text" id="name" name="name" required maxlength="100" autocomplete="name" value="{escape(form.get("name", ""))}">
{result_box}
<button type="submit" name="action" value="" disabled hidden aria-hidden="true"></button>
{buttons}
</form>"""
    return html.document(f"Escalation: {shown['title']}", body)


def answered_page(record: dict[str, Any], answer: dict[str, Any], *, just_now: bool) -> str:
    """The escalation after its answer: by whom and how (``just_now``: this visitor's answer)."""
    lead = "Your answer was recorded; the run goes on." if just_now else "This was already answered; the first answer stands."
    result = (
        f'<dt>Result given</dt><dd id="result">{escape(json.dumps(answer["result"], ensure_ascii=False) if not isinstance(answer["result"], str) else answer["result"])}</dd>'
        if "result" in answer
        else ""
    )
    body = f"""
<h1 id="outcome">{escape(_ANSWERED.get(str(answer.get("action")), "Answered"))}</h1>
<p>{lead}</p>
<dl id="decision">
<dt>Run</dt><dd>{escape(record["run_id"])} (step {record["turn"]})</dd>
<dt>Answered by</dt><dd id="approver">{escape(str(answer.get("resolver") or "unknown"))}</dd>
{result}
</dl>"""
    return html.document("Escalation answered", body)
