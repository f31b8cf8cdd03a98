"""The HTML of a tool call's decision page and of its decided page, written for the person who
decides, not for the engineer who built the agent.

The page leads with what the call does and its risk in the tool's own words (``Tool.summary``,
``Tool.risk``), then why the agent asks, the call's details as text in the tool's order, who asked
and when, the time left, what each choice does, and a form generated from the tool's argument
schema (``longstep.humans.argument_form``) to change the details before approving.
"""

from __future__ import annotations

import datetime as dt
import json
from html import escape
from typing import Any

from longstep.humans import argument_form as forms
from longstep.humans.argument_form import FormField
from longstep.humans.pages_html import DecisionPage, document, duration, error_html, form_start, when
from longstep.tools.plain import plain_value

COLLAPSE_FROM_CHARS = 300  # a value longer than this is shown collapsed (<details>)
_DONE = {"approved": "Approved", "rejected": "Rejected", "edited": "Approved with changes"}
_NEXT = {
    "approved": "It runs with the details below, and the agent carries on.",
    "edited": "It runs with the details below (as changed), and the agent carries on.",
    "rejected": "It does not run; the agent is told the reason and carries on without it.",
}


def _label(fields: list[FormField] | None, name: str) -> str:
    return next((f.label for f in fields or () if f.name == name), name)


def _value_html(name: str, value: Any) -> str:
    """One argument's value as text: lists as bullets, nested shapes as indented JSON."""
    if isinstance(value, list) and value and all(isinstance(v, (str, int, float, bool)) for v in value):
        shown = "<ul>" + "".join(f"<li>{escape(plain_value(v))}</li>" for v in value) + "</ul>"
        size = sum(len(str(v)) for v in value)
    elif isinstance(value, (dict, list)):
        text = json.dumps(value, indent=2, ensure_ascii=False)
        shown, size = f"<pre>{escape(text)}</pre>", len(text)
    else:
        text = plain_value(value)
        shown, size = f'<div class="text">{escape(text)}</div>', len(text)
    if size > COLLAPSE_FROM_CHARS:
        shown = f"<details><summary>{size:,} characters (show)</summary>{shown}</details>"
    return f'<dd data-argument="{escape(name)}">{shown}</dd>'


def arguments_html(arguments: Any, fields: list[FormField] | None, element_id: str = "arguments") -> str:
    """The arguments as text, labelled, in the tool's declared order."""
    if not isinstance(arguments, dict) or not arguments:
        return f'<p id="{element_id}">{escape("(no details)" if not arguments else plain_value(arguments))}</p>'
    rows = "".join(f"<dt>{escape(_label(fields, n))}</dt>{_value_html(n, arguments[n])}" for n in forms.ordered(fields or [], arguments))
    return f'<dl id="{element_id}">{rows}</dl>'


def _control(field: FormField, text: str, error: str | None) -> str:
    """One argument's labelled control, its hint and its error (tied to it for screen readers)."""
    ident = f"arg-{field.name}"
    described = " ".join(x for x in (f"{ident}-hint" if field.help else "", f"{ident}-error" if error else "") if x)
    attrs = f'id="{escape(ident)}" name="{escape(forms.FIELD_PREFIX + field.name)}"'
    if described:
        attrs += f' aria-describedby="{escape(described)}"'
    if error:
        attrs += ' aria-invalid="true"'
    if field.kind in ("choice", "boolean"):
        values = [str(o) for o in field.options] if field.kind == "choice" else ["yes", "no"]
        values = ([""] if field.nullable or text == "" else []) + values
        options = "".join(f'<option value="{escape(v)}"{" selected" if v == text else ""}>{escape(v or "(none)")}</option>' for v in values)
        control = f"<select {attrs}>{options}</select>"
    elif field.kind in ("long_text", "list", "json") or "\n" in text or len(text) > 80:
        css = ' class="json"' if field.kind == "json" else ""
        rows = min(12, max(3, text.count("\n") + 2))
        control = f'<textarea {attrs}{css} rows="{rows}" spellcheck="{"false" if field.kind == "json" else "true"}">{escape(text)}</textarea>'
    else:
        mode = {"integer": ' inputmode="numeric"', "number": ' inputmode="decimal"'}.get(field.kind, "")
        control = f'<input type="text" {attrs}{mode} value="{escape(text)}">'
    hints = {"list": "one per line", "json": "as JSON: a form cannot show this shape", "boolean": "yes or no"}
    hint = "; ".join(x for x in (field.help, hints.get(field.kind, "")) if x)
    optional = "" if field.required else " (optional)"
    return (
        f'<label for="{escape(ident)}">{escape(field.label)}{optional}'
        + (f'<span class="hint" id="{escape(ident)}-hint">{escape(hint)}</span>' if hint else "")
        + "</label>"
        + (f'<span class="field-error" id="{escape(ident)}-error">{escape(field.label)}: {escape(error)}</span>' if error else "")
        + control
    )


def edit_html(page: DecisionPage) -> str:
    """The arguments as a form (JSON as a whole only when the tool's schema could not be read)."""
    arguments = page.request["input"] if isinstance(page.request["input"], dict) else {}
    if page.fields is None:
        text = page.form.get("arguments") or json.dumps(arguments, indent=2)
        return (
            '<label for="arguments-input">The details, as JSON</label>'
            f'<textarea id="arguments-input" name="arguments" class="json" rows="10" spellcheck="false">{escape(text)}</textarea>'
        )
    fields = forms.with_undeclared(page.fields, arguments)
    controls = []
    for field in fields:
        posted = page.form.get(forms.FIELD_PREFIX + field.name)
        text = posted if posted is not None else forms.form_value(field, arguments.get(field.name))
        controls.append(_control(field, text, page.field_errors.get(field.name)))
    return "\n".join(controls)


def _field_errors(page: DecisionPage) -> str:
    if not page.field_errors:
        return ""
    items = "".join(
        f'<li><a href="#arg-{escape(n)}">{escape(_label(page.fields, n))}</a> (input.{escape(n)}): {escape(m)}</li>'
        for n, m in page.field_errors.items()
    )
    return f'<div class="error" role="alert" id="error">Nothing was decided. Please correct:<ul>{items}</ul></div>'


def decision_page(page: DecisionPage) -> str:
    """The decision page of a tool call.

    The form's first button is disabled: pressing Enter in a field submits with the first button
    (implicit submission), so a stray Enter decides nothing.
    """
    r = page.request
    reason = page.model_text.strip()
    said = f'<blockquote id="model-text">{escape(reason)}</blockquote>' if reason else '<p id="model-text">The agent gave no reason.</p>'
    opened = " open" if page.field_errors or page.form.get("action") == "edit" else ""
    body = f"""
<p class="note">Approval needed</p>
<h1 id="summary">{escape(page.summary)}</h1>
<p class="risk" id="risk"><strong>Risk:</strong> {escape(page.risk)}</p>
<p id="time-left"><strong>{escape(duration(page.seconds_left))} left to decide</strong> (until {escape(when_iso(r["expires_at"]))}).
If nobody decides by then, this does not happen, and the agent is told so.</p>
{error_html(page)}{_field_errors(page)}
<h2>Why the agent asks</h2>
{said}
<h2>Details</h2>
{arguments_html(r["input"], page.fields)}
<h2>Who asks</h2>
<dl id="context">
<dt>Asked</dt><dd id="requested">{escape(when_iso(r["requested_at"]))} ({escape(duration(page.seconds_waited))} ago)</dd>
<dt>Agent</dt><dd id="agent">{escape(page.agent)}</dd>
<dt>Run</dt><dd id="run">{escape(r["run_id"])} (step {r["turn"]}, action {r["call"] + 1})</dd>
<dt>The run's goal</dt><dd id="goal">{escape(page.goal)}</dd>
<dt>Action</dt><dd id="tool">{escape(r["tool"])}: {escape(page.tool_description)}</dd>
</dl>
<h2>Your decision</h2>
<ul class="note" id="choices">
<li><strong>Approve</strong>: this happens now, with the details above.</li>
<li><strong>Approve with my changes</strong>: this happens now, with the details as you changed them below.</li>
<li><strong>Reject</strong>: this does not happen; the agent is told your reason and carries on without it.</li>
</ul>
{form_start(page)}
<button type="submit" name="action" value="" disabled hidden aria-hidden="true"></button>
<details id="edit-details"{opened}><summary>Change the details before approving</summary>
{edit_html(page)}
<button type="submit" name="action" value="edit" id="edit">Approve with my changes</button>
</details>
<button type="submit" class="primary" name="action" value="approve" id="approve">Approve</button>
<button type="submit" class="danger" name="action" value="reject" id="reject">Reject</button>
</form>"""
    return document(f"Approval: {page.summary}", body)


def when_iso(iso: str | None) -> str:
    """An ISO 8601 instant (a request view's) as the pages show instants."""
    if not iso:
        return "unknown"
    return when(dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp())


def decided_page(
    request: dict[str, Any], *, just_now: bool, fields: list[FormField] | None = None, summary: str = "", show_arguments: bool = True
) -> str:
    """The request after a decision: by whom, when, what, and the arguments that ran (``just_now``:
    this visitor's decision; ``summary``: what the call that ran does; ``show_arguments``: False
    for a request that has no call, a budget ask)."""
    status = request["status"]
    decision = request.get("decision") or {}
    lead = "Your decision was recorded." if just_now else "This request was already decided; the first decision stands."
    reason = f'<dt>Reason</dt><dd id="reason">{escape(str(decision["reason"]))}</dd>' if decision.get("reason") else ""
    ran = decision["input"] if decision.get("input") is not None else request["input"]
    heading = "The details it ran with" if status in ("approved", "edited") else "The details asked for (not run)"
    body = f"""
<h1 id="outcome">{escape(_DONE.get(status, status))}: {escape(summary or request["tool"])}</h1>
<p>{lead} {escape(_NEXT.get(status, ""))}</p>
<dl id="decision">
<dt>Run</dt><dd>{escape(request["run_id"])} (step {request["turn"]}, action {request["call"] + 1})</dd>
<dt>Decided by</dt><dd id="approver">{escape(str(request.get("approver") or "unknown"))}</dd>
<dt>Decided at</dt><dd id="decided-at">{escape(when_iso(request.get("decided_at")))}</dd>
{reason}
</dl>
{f"<h2>{heading}</h2>{arguments_html(ran, fields, 'ran')}" if show_arguments else ""}"""
    return document(f"Decided: {summary or request['tool']}", body)
