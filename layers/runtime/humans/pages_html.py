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
from dataclasses import dataclass, field
from html import escape
from typing import Any

CSS = """
body{font:16px/1.5 system-ui,sans-serif;color:#1a1a1a;background:#fff;max-width:52rem;margin:0 auto;padding:1rem}
h1{font-size:1.5rem;overflow-wrap:anywhere}h2{font-size:1.15rem;margin-top:1.5rem}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem}dt{font-weight:600}dd{margin:0;overflow-wrap:anywhere}
pre{background:#f3f3f3;border:1px solid #767676;padding:.5rem;overflow:auto;white-space:pre-wrap}
.text{white-space:pre-wrap}dd ul{margin:0;padding-left:1.2rem}
label{display:block;font-weight:600;margin-top:.75rem}
input[type=text],textarea,select{width:100%;box-sizing:border-box;font:inherit;border:1px solid #555;padding:.4rem;background:#fff;color:#1a1a1a}
textarea.json{font-family:ui-monospace,monospace}
button{font:inherit;margin:.75rem .5rem 0 0;padding:.6rem 1rem;border:2px solid #1a1a1a;background:#fff;color:#1a1a1a;cursor:pointer}
button.primary{background:#0b4f8a;border-color:#0b4f8a;color:#fff}
button.danger{background:#a00000;border-color:#a00000;color:#fff}
:focus-visible{outline:3px solid #b35900;outline-offset:2px}
.error{border:2px solid #a00000;color:#a00000;padding:.5rem;font-weight:600}
.field-error{display:block;color:#a00000;font-weight:600}[aria-invalid=true]{border:2px solid #a00000}
.hint{display:block;color:#3d3d3d;font-weight:400}
.risk{border-left:6px solid #a00000;background:#fbeaea;padding:.5rem .75rem}
blockquote{margin:0;border-left:4px solid #767676;padding:.25rem .75rem;white-space:pre-wrap;overflow-wrap:anywhere}
details{margin-top:.75rem}summary{cursor:pointer;font-weight:600}
.note{color:#3d3d3d}table{border-collapse:collapse;width:100%}
th,td{text-align:left;border-bottom:1px solid #999;padding:.3rem .5rem;vertical-align:top}
@media (max-width:36rem){dl{grid-template-columns:1fr}dd{margin-bottom:.5rem}button{width:100%;margin-right:0}}
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


@dataclass
class DecisionPage:
    """What the decision page shows (``request`` is an ``approvals.view``).

    ``fields`` is the form of the tool's arguments (None: the tool's schema could not be read, and
    the arguments are edited as JSON); ``field_errors`` a plain message per argument the schema
    refused; ``error`` the one message of anything else refused (``field`` and ``message``).
    """

    request: dict[str, Any]
    goal: str
    agent: str
    summary: str
    risk: str
    tool_description: str
    model_text: str
    seconds_left: float
    seconds_waited: float
    nonce: str
    csrf: str
    subject: str
    fields: list[Any] | None = None
    error: dict[str, str] | None = None
    field_errors: dict[str, str] = field(default_factory=dict)
    form: dict[str, str] = field(default_factory=dict)


def error_html(page: DecisionPage) -> str:
    """The refusal at the top of a re-rendered form (nothing was decided), or nothing."""
    if not page.error:
        return ""
    return f'<p class="error" role="alert" id="error">Nothing was decided. {escape(page.error["field"])}: {escape(page.error["message"])}</p>'


def _digest_field(page: DecisionPage) -> str:
    """The digest of the arguments shown: a decision posted after they changed is refused (stale)."""
    digest = page.request.get("input_digest")
    return f'\n<input type="hidden" name="digest" value="{escape(digest)}">' if digest else ""


def form_start(page: DecisionPage) -> str:
    """The decision form's opening: its CSRF fields, the approver's name and the reason."""
    return f"""<form method="post" action="">
<input type="hidden" name="nonce" value="{escape(page.nonce)}">
<input type="hidden" name="csrf" value="{escape(page.csrf)}">{_digest_field(page)}
<label for="name">Your name (recorded with the decision, with this link's recipient {escape(page.subject)})</label>
<input type="text" id="name" name="name" required maxlength="100" autocomplete="name" value="{escape(page.form.get("name", ""))}">
<label for="reason">Reason (required to reject)</label>
<textarea id="reason" name="reason" rows="2" maxlength="2000">{escape(page.form.get("reason", ""))}</textarea>"""


def budget_page(page: DecisionPage) -> str:
    """The decision page of a budget ask (``longstep.humans.budget_asks``): approve or reject, no edit."""
    r = page.request
    question = str((r["input"] or {}).get("question", ""))
    error = error_html(page)
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
{form_start(page)}
<button type="submit" class="primary" name="action" value="approve" id="approve">Approve</button>
<button type="submit" class="danger" name="action" value="reject" id="reject">Reject</button>
</form>"""
    return document(f"Budget: {r['run_id']}", body)


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
        f'<th scope="col">Run</th><th scope="col">What</th><th scope="col">Time left</th><th scope="col">Link</th></tr></thead>'
        f"<tbody>{rows}</tbody></table>"
        if approvals
        else '<p id="approvals">No approval is waiting.</p>'
    )
    esc_rows = "".join(
        f"<tr><td>{escape(duration(now - e['requested']))}</td><td>{escape(e['run_id'])}</td>"
        f"<td>{escape(e.get('tool') or e['task'])}</td><td>{escape(e['reason'][:300])}</td>"
        f'<td><a href="{escape(e["href"])}">Answer</a></td></tr>'
        for e in escalations
    )
    escalations_html = (
        f'<table id="escalations"><thead><tr><th scope="col">Waiting</th><th scope="col">Run</th>'
        f'<th scope="col">Step</th><th scope="col">What went wrong</th><th scope="col">Link</th></tr></thead><tbody>{esc_rows}</tbody></table>'
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
