"""The HTML of the approval pages: plain server-rendered documents, no script, no external asset.

Every value is escaped (``html.escape``); the one stylesheet is inline and allowed by its hash in
the Content-Security-Policy, which otherwise allows nothing (``default-src 'none'``), posts forms
only to this origin and forbids framing. Pages are accessible without a framework: native form
controls with labels, a visible focus ring, text contrast above 7:1 (WCAG AAA for body text).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
from dataclasses import dataclass, field
from html import escape
from typing import Any

COLLAPSE_FROM_CHARS = 300  # an argument whose JSON is longer is shown collapsed (<details>)

CSS = """
body{font:16px/1.5 system-ui,sans-serif;color:#1a1a1a;background:#fff;max-width:52rem;margin:0 auto;padding:1rem}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:1.5rem}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem}dt{font-weight:600}dd{margin:0}
pre{background:#f3f3f3;border:1px solid #767676;padding:.5rem;overflow:auto;white-space:pre-wrap}
label{display:block;font-weight:600;margin-top:.75rem}
input[type=text],textarea{width:100%;box-sizing:border-box;font:inherit;border:1px solid #555;padding:.4rem}
textarea{font-family:ui-monospace,monospace}
button{font:inherit;margin:.75rem .5rem 0 0;padding:.5rem 1rem;border:2px solid #1a1a1a;background:#fff;color:#1a1a1a;cursor:pointer}
button.primary{background:#0b4f8a;border-color:#0b4f8a;color:#fff}
:focus-visible{outline:3px solid #b35900;outline-offset:2px}
.error{border:2px solid #a00000;color:#a00000;padding:.5rem;font-weight:600}
.note{color:#3d3d3d}table{border-collapse:collapse;width:100%}
th,td{text-align:left;border-bottom:1px solid #999;padding:.3rem .5rem;vertical-align:top}
""".strip()

_STYLE_HASH = base64.b64encode(hashlib.sha256(CSS.encode("utf-8")).digest()).decode("ascii")
CONTENT_SECURITY_POLICY = f"default-src 'none'; style-src 'sha256-{_STYLE_HASH}'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",  # for browsers that predate frame-ancestors
}
CONTENT_TYPE = "text/html; charset=utf-8"


def document(title: str, body: str) -> str:
    """A whole page around ``body`` (already escaped HTML)."""
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f'<meta name="robots" content="noindex"><title>{escape(title)}</title><style>{CSS}</style></head>'
        f"<body><main>{body}</main></body></html>\n"
    )


def duration(seconds: float) -> str:
    """``2 days 3 hours``, ``45 minutes``, ``less than a minute``."""
    seconds = max(0, int(seconds))
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes = rest // 60
    parts = [(days, "day"), (hours, "hour"), (minutes, "minute")]
    shown = [f"{n} {unit}{'' if n == 1 else 's'}" for n, unit in parts if n][:2]
    return " ".join(shown) or "less than a minute"


def when(epoch: float | None) -> str:
    if epoch is None:
        return "unknown"
    return dt.datetime.fromtimestamp(float(epoch), dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def arguments_html(arguments: Any) -> str:
    """The arguments as pretty JSON, one block per top-level argument; long values collapsed."""
    if not isinstance(arguments, dict) or not arguments:
        return f'<pre id="arguments">{escape(json.dumps(arguments, indent=2, sort_keys=True))}</pre>'
    rows = []
    for name in sorted(arguments):
        text = json.dumps(arguments[name], indent=2, ensure_ascii=False)
        value = f'<pre data-argument="{escape(name)}">{escape(text)}</pre>'
        if len(text) > COLLAPSE_FROM_CHARS:
            value = f"<details><summary>{len(text):,} characters (show)</summary>{value}</details>"
        rows.append(f"<dt>{escape(name)}</dt><dd>{value}</dd>")
    return f'<dl id="arguments">{"".join(rows)}</dl>'


@dataclass
class DecisionPage:
    """What the decision page shows (``request`` is an ``approvals.view``)."""

    request: dict[str, Any]
    goal: str
    agent: str
    effect: str
    tool_description: str
    model_text: str
    seconds_left: float
    nonce: str
    csrf: str
    subject: str
    error: dict[str, str] | None = None
    form: dict[str, str] = field(default_factory=dict)


def _error(page: DecisionPage) -> str:
    if not page.error:
        return ""
    return f'<p class="error" role="alert" id="error">Nothing was decided. {escape(page.error["field"])}: {escape(page.error["message"])}</p>'


def _form_start(page: DecisionPage) -> str:
    """The decision form's opening: its CSRF fields, the approver's name and the reason."""
    return f"""<form method="post" action="">
<input type="hidden" name="nonce" value="{escape(page.nonce)}">
<input type="hidden" name="csrf" value="{escape(page.csrf)}">
<label for="name">Your name (recorded with the decision, with this link's recipient {escape(page.subject)})</label>
<input type="text" id="name" name="name" required maxlength="100" autocomplete="name" value="{escape(page.form.get("name", ""))}">
<label for="reason">Reason (required to reject)</label>
<textarea id="reason" name="reason" rows="2" maxlength="2000">{escape(page.form.get("reason", ""))}</textarea>"""


def decision_page(page: DecisionPage) -> str:
    r = page.request
    arguments_text = page.form.get("arguments") or json.dumps(r["input"], indent=2, sort_keys=True)
    error = _error(page)
    body = f"""
<h1>Approve a call to <code>{escape(r["tool"])}</code>?</h1>
{error}
<dl id="summary">
<dt>Run</dt><dd id="run">{escape(r["run_id"])} (turn {r["turn"]}, call {r["call"]})</dd>
<dt>Goal</dt><dd id="goal">{escape(page.goal)}</dd>
<dt>Agent</dt><dd id="agent">{escape(page.agent)}</dd>
<dt>Tool</dt><dd id="tool">{escape(r["tool"])}: {escape(page.tool_description)}</dd>
<dt>Effect class</dt><dd id="effect">{escape(page.effect)}</dd>
<dt>Time left</dt><dd id="time-left">{escape(duration(page.seconds_left))} (until {escape(r["expires_at"] or "")})</dd>
</dl>
<h2>Arguments</h2>
{arguments_html(r["input"])}
<h2>What the model said before the call</h2>
<pre id="model-text">{escape(page.model_text or "(no text)")}</pre>
<h2>Your decision</h2>
<ul class="note">
<li><strong>Approve</strong>: the call runs with the arguments above.</li>
<li><strong>Reject</strong>: the call does not run; the model is told your reason and goes on.</li>
<li><strong>Edit</strong>: the call runs with your arguments instead, once they pass the tool's schema.</li>
<li>If nobody decides in time the call does not run, and the model is told so.</li>
</ul>
{_form_start(page)}
<label for="arguments-input">Arguments, as JSON (used by Edit)</label>
<textarea id="arguments-input" name="arguments" rows="10" spellcheck="false">{escape(arguments_text)}</textarea>
<button type="submit" class="primary" name="action" value="approve" id="approve">Approve</button>
<button type="submit" name="action" value="reject" id="reject">Reject</button>
<button type="submit" name="action" value="edit" id="edit">Edit and approve</button>
</form>"""
    return document(f"Approval: {r['tool']} in {r['run_id']}", body)


def budget_page(page: DecisionPage) -> str:
    """The decision page of a budget ask (``longstep.humans.budget_asks``): approve or reject, no edit."""
    r = page.request
    question = str((r["input"] or {}).get("question", ""))
    error = _error(page)
    body = f"""
<h1>Allow run <code>{escape(r["run_id"])}</code> more budget?</h1>
{error}
<p id="question">{escape(question)}</p>
<dl id="summary">
<dt>Run</dt><dd id="run">{escape(r["run_id"])} (before turn {r["turn"]}, ask {r["call"] + 1})</dd>
<dt>Goal</dt><dd id="goal">{escape(page.goal)}</dd>
<dt>Agent</dt><dd id="agent">{escape(page.agent)}</dd>
<dt>Time left</dt><dd id="time-left">{escape(duration(page.seconds_left))} (until {escape(r["expires_at"] or "")})</dd>
</dl>
<h2>Your decision</h2>
<ul class="note">
<li><strong>Approve</strong>: the run's limit grows by the amount asked, once.</li>
<li><strong>Reject</strong>: the run goes on to its limit, then stops cleanly (status stopped, reason budget).</li>
<li>If nobody decides in time, the run stops at its limit.</li>
</ul>
{_form_start(page)}
<button type="submit" class="primary" name="action" value="approve" id="approve">Approve</button>
<button type="submit" name="action" value="reject" id="reject">Reject</button>
</form>"""
    return document(f"Budget: {r['run_id']}", body)


_DONE = {"approved": "approved", "rejected": "rejected", "edited": "edited and approved"}


def decided_page(request: dict[str, Any], *, just_now: bool) -> str:
    """The request after a decision: by whom, when, what (``just_now``: this visitor's)."""
    status = request["status"]
    decision = request.get("decision") or {}
    lead = "Your decision was recorded." if just_now else "This request was already decided; the first decision stands."
    extra = ""
    if decision.get("reason"):
        extra += f"<dt>Reason</dt><dd>{escape(str(decision['reason']))}</dd>"
    if decision.get("input") is not None:
        extra += f'<dt>Arguments used</dt><dd><pre id="edited">{escape(json.dumps(decision["input"], indent=2, sort_keys=True))}</pre></dd>'
    body = f"""
<h1 id="outcome">{escape(request["tool"])}: {escape(_DONE.get(status, status))}</h1>
<p>{lead}</p>
<dl id="decision">
<dt>Run</dt><dd>{escape(request["run_id"])} (turn {request["turn"]}, call {request["call"]})</dd>
<dt>Decided by</dt><dd id="approver">{escape(str(request.get("approver") or "unknown"))}</dd>
<dt>Decided at</dt><dd id="decided-at">{escape(str(request.get("decided_at") or ""))}</dd>
{extra}
</dl>"""
    return document(f"Decided: {request['tool']}", body)


def expired_page(request: dict[str, Any] | None) -> str:
    """The link (or the request it names) has expired: nothing can be decided with it."""
    what = ""
    if request is not None:
        what = f"<p>The request to call <code>{escape(request['tool'])}</code> in run {escape(request['run_id'])} waited until {escape(str(request.get('expires_at')))}.</p>"
    body = f"""
<h1 id="outcome">This link has expired</h1>
{what}
<p>Nothing was decided with it. If the request timed out, the model was told so and went on without the call.</p>"""
    return document("Link expired", body)


def invalid_page() -> str:
    return document("Not a valid link", '<h1 id="outcome">This link is not valid</h1><p>Check that you copied the whole link.</p>')


def message_page(title: str, text: str) -> str:
    return document(title, f'<h1 id="outcome">{escape(title)}</h1><p>{escape(text)}</p>')


def inbox_page(subject: str, approvals: list[dict[str, Any]], escalations: list[dict[str, Any]], now: float) -> str:
    """Pending approvals (each with its decision link, ``href``) and escalations, oldest first."""
    rows = "".join(
        f"<tr><td>{escape(duration(now - a['requested']))}</td><td>{escape(a['run_id'])}</td><td>{escape(a['tool'])}</td>"
        f'<td>{escape(duration(a["expires"] - now))}</td><td><a href="{escape(a["href"])}">Decide</a></td></tr>'
        for a in approvals
    )
    approvals_html = (
        f'<table id="approvals"><caption class="note">Oldest first</caption><thead><tr><th scope="col">Waiting</th>'
        f'<th scope="col">Run</th><th scope="col">Tool</th><th scope="col">Time left</th><th scope="col">Link</th></tr></thead>'
        f"<tbody>{rows}</tbody></table>"
        if approvals
        else '<p id="approvals">No approval is waiting.</p>'
    )
    esc_rows = "".join(
        f"<tr><td>{escape(duration(now - e['requested']))}</td><td>{escape(e['run_id'])}</td><td>{e['turn']}</td>"
        f"<td>{escape(e['task'])}{' ' + escape(e['tool']) if e.get('tool') else ''}</td><td>{escape(e['error'])}: {escape(e['reason'][:300])}</td>"
        f"<td><code>longstep resolve {escape(e['run_id'])} {e['turn']}{' --call ' + str(e['call']) if e.get('call') is not None else ''} --retry | --skip JSON | --abort</code></td></tr>"
        for e in escalations
    )
    escalations_html = (
        f'<table id="escalations"><thead><tr><th scope="col">Waiting</th><th scope="col">Run</th><th scope="col">Turn</th>'
        f'<th scope="col">Step</th><th scope="col">Error</th><th scope="col">Answer with</th></tr></thead><tbody>{esc_rows}</tbody></table>'
        if escalations
        else '<p id="escalations">No escalation is waiting.</p>'
    )
    body = f"""
<h1>Waiting for a human</h1>
<p class="note">For {escape(subject)}, as of {escape(when(now))}.</p>
<h2>Approvals</h2>
{approvals_html}
<h2>Escalations</h2>
{escalations_html}"""
    return document("Inbox", body)
