# ruff: noqa: F811 - the fixtures of test_approval_api.py are imported and requested by name
"""The approval pages on the approval API's Lambda (moto): a signed link opens a decision page,
the form decides once, a bad edit names its field and decides nothing, links cannot be widened,
and every page carries the security headers."""

from __future__ import annotations

import copy
import json
import re
from urllib.parse import urlencode

import boto3
import pytest

from longstep import clock, keys, links
from longstep.humans import pages_html
from longstep.humans import requests as approvals
from longstep.humans.table import APPROVED, EDITED, EXPIRED, PENDING, REJECTED, ApprovalTable, arguments_digest
from longstep.store import CheckpointStore

from tests.functional.conftest import handler, load_event, scan
from tests.functional.test_approval_api import EMAIL, RUN, TOKEN, RecordingStepFunctions, api, pending, sfn  # noqa: F401 - fixtures

KEY = "k" * 64
SCANNER = "Mozilla/5.0 (compatible; Barracuda Sentinel link scanner)"


@pytest.fixture
def ring(aws, monkeypatch):
    secret = boto3.client("secretsmanager").create_secret(Name="link-key", SecretString=KEY)["ARN"]
    monkeypatch.setenv(links.ENV_LINK_KEY_SECRET, secret)
    links.KEYS.clear()
    yield links.KeyRing(KEY.encode())
    links.KEYS.clear()


def page(method: str, route: str, link: str, form: dict[str, str] | None = None, agent: str = "Mozilla/5.0") -> tuple[int, str, dict]:
    event = copy.deepcopy(load_event("approval_api_get"))
    event.update(
        resource=f"/pages/{route}/{{link}}",
        path=f"/pages/{route}/{link}",
        httpMethod=method,
        pathParameters={"link": link},
        body=urlencode(form) if form is not None else None,
    )
    event["headers"] = {"Host": "abcdef1234.execute-api.us-east-1.amazonaws.com", "User-Agent": agent}
    event["multiValueHeaders"] = {k: [v] for k, v in event["headers"].items()}
    if form is not None:
        event["headers"]["Content-Type"] = "application/x-www-form-urlencoded"
    event["requestContext"]["identity"] = {"sourceIp": "203.0.113.10", "userAgent": agent}
    response = handler("approval_api")(event)
    headers = {**response.get("headers", {}), **{k: v[-1] for k, v in (response.get("multiValueHeaders") or {}).items()}}
    assert TOKEN not in json.dumps(response), "a task token on a page"
    return response["statusCode"], response["body"], headers


def link_for(ring: links.KeyRing, approval_id: str, seconds: int = 3600, subject: str = "oncall@example.com") -> str:
    return ring.sign(links.Capability(links.Scope(approval=approval_id), int(clock.now()) + seconds, subject))


def hidden(body: str) -> dict[str, str]:
    return dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', body))


def test_the_page_shows_the_call_and_decides_nothing_when_opened(aws, ring, pending):
    link = link_for(ring, pending)
    for agent in ("Mozilla/5.0", SCANNER):
        status, body, headers = page("GET", "decide", link, agent=agent)
        assert status == 200
        assert "send_email" in body and "payments-oncall@example.com" in body and "Emailing on-call." in body
        assert "Triage" in body  # the run's goal
        # In the approver's words: the tool's summary and risk, no effect-class jargon.
        assert "Send an email to payments-oncall@example.com with the subject &quot;Checkout incident&quot;" in body
        assert "An email cannot be taken back" in body and "at_most_once" not in body and "Effect class" not in body
        # The arguments as text (not quoted JSON), in the tool's order (to, subject, body), not alphabetical.
        assert "&quot;payments-oncall@example.com&quot;" not in body
        assert body.index('data-argument="to"') < body.index('data-argument="subject"') < body.index('data-argument="body"')
        assert 'id="requested"' in body and 'id="agent">triage<' in body  # when it was asked, by which agent
        assert 'name="viewport"' in body and "@media (max-width" in body  # phone width
        assert 'class="danger" name="action" value="reject"' in body  # Reject is the destructive choice
    assert ApprovalTable("approvals", aws["ddb"]).get(pending)["status"] == PENDING
    assert headers["Content-Security-Policy"] == pages_html.CONTENT_SECURITY_POLICY
    assert "default-src 'none'" in headers["Content-Security-Policy"] and "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    assert (headers["Cache-Control"], headers["X-Content-Type-Options"], headers["Referrer-Policy"]) == ("no-store", "nosniff", "no-referrer")


def test_a_bad_edit_names_the_field_and_a_good_one_decides_once(aws, ring, sfn, pending):
    link = link_for(ring, pending)
    _, body, _ = page("GET", "decide", link)
    # The edit form has one field per argument, filled with the call's values.
    assert re.search(r'<input type="text" id="arg-to" name="arg.to"[^>]* value="payments-oncall@example.com">', body)
    fields = {f"arg.{name}": value for name, value in EMAIL.items()}
    bad = {**fields, "arg.to": "not-an-address", "arg.subject": ""}
    status, body, _ = page("POST", "decide", link, {**hidden(body), "name": "Alice", "action": "edit", **bad})
    assert status == 400 and "Nothing was decided" in body and 'value="not-an-address"' in body  # the text is kept
    # One plain message per field, naming it; never the pattern's regular expression.
    assert "To: is not in the expected form (an email address, like name@example.com)" in body
    assert "Subject: cannot be empty" in body and "(input.to)" in body and "(input.subject)" in body
    assert "^[^@" not in body and 'id="arg-to" name="arg.to" aria-describedby="arg-to-hint arg-to-error" aria-invalid="true"' in body
    assert ApprovalTable("approvals", aws["ddb"]).get(pending)["status"] == PENDING and sfn.sent == []
    good = {**EMAIL, "to": "team-orders@example.com"}
    form = {f"arg.{name}": value for name, value in good.items()}
    status, body, _ = page("POST", "decide", link, {**hidden(body), "name": "Alice", "action": "edit", **form})
    assert status == 200 and "Your decision was recorded" in body
    assert re.search(r'<dl id="ran"><dt>To</dt><dd data-argument="to"><div class="text">team-orders@example.com<', body)  # what ran
    stored = ApprovalTable("approvals", aws["ddb"]).get(pending)
    assert stored["status"] == EDITED and stored["approver"] == "Alice (link to oncall@example.com)"
    assert sfn.sent[-1]["output"]["input"] == good
    # A second visitor (or the same one again) sees who decided and when; nothing changes.
    status, body, _ = page("GET", "decide", link)
    assert status == 410 and "already decided" in body and "Alice (link to oncall@example.com)" in body
    status, _, _ = page("POST", "decide", link, {**hidden(body), "name": "Bob", "action": "approve"})
    assert status in (403, 410) and len(sfn.sent) == 1


def test_reject_needs_a_reason_and_posts_need_the_pages_token(aws, ring, sfn, pending):
    link = link_for(ring, pending)
    _, body, _ = page("GET", "decide", link)
    status, _, _ = page("POST", "decide", link, {"name": "Mallory", "action": "approve"})  # no CSRF token
    assert status == 403
    status, _, _ = page("POST", "decide", link, {**hidden(body), "csrf": "x" * 43, "name": "Mallory", "action": "approve"})
    assert status == 403
    status, text, _ = page("POST", "decide", link, {**hidden(body), "name": "Alice", "action": "reject", "reason": ""})
    assert status == 400 and "reason" in text
    status, _, _ = page("POST", "decide", link, {**hidden(body), "name": "", "action": "approve"})
    assert status == 400 and sfn.sent == []
    status, text, _ = page("POST", "decide", link, {**hidden(body), "name": "Alice", "action": "reject", "reason": "wrong team"})
    assert status == 200 and ApprovalTable("approvals", aws["ddb"]).get(pending)["status"] == REJECTED


def test_expired_forged_and_foreign_links(aws, ring, pending):
    assert page("GET", "decide", link_for(ring, pending, seconds=-1))[0] == 410
    assert "expired" in page("GET", "decide", link_for(ring, pending, seconds=-1))[1]
    other_key = links.KeyRing(b"o" * 64)
    assert page("GET", "decide", link_for(other_key, pending))[0] == 404
    assert page("GET", "decide", link_for(ring, "NoSuchApproval123"))[0] == 404
    inbox = ring.sign(links.Capability(links.Scope(runs=(RUN,)), int(clock.now()) + 60, "ops"))
    assert page("GET", "decide", inbox)[0] == 404  # an inbox link decides nothing directly
    assert page("GET", "inbox", link_for(ring, pending))[0] == 404


def test_the_inbox_lists_the_scope_oldest_first_with_links(aws, ring, pending):
    status, body, headers = page("GET", "inbox", ring.sign(links.Capability(links.Scope(runs=(RUN,)), int(clock.now()) + 60, "ops")))
    assert status == 200 and headers["Cache-Control"] == "no-store"
    (href,) = re.findall(r'href="\.\./decide/([^"]+)"', body)
    child = ring.verify(href, clock.now())
    assert child.scope.approval == pending and child.expires_at <= int(clock.now()) + 60  # never outlives the inbox link
    assert page("GET", "decide", href)[0] == 200
    assert "Send an email to payments-oncall@example.com" in body  # each request in the tool's words
    _, body, _ = page("GET", "inbox", ring.sign(links.Capability(links.Scope(agent="triage"), int(clock.now()) + 60, "ops")))
    assert "Decide" in body
    _, body, _ = page("GET", "inbox", ring.sign(links.Capability(links.Scope(runs=("someone-else",)), int(clock.now()) + 60, "ops")))
    assert "No approval is waiting" in body


def test_without_a_key_the_pages_say_so(aws, pending, monkeypatch):
    monkeypatch.delenv(links.ENV_LINK_KEY_SECRET, raising=False)
    status, body, headers = page("GET", "decide", "v1.a.b")
    assert status == 503 and headers["Cache-Control"] == "no-store"


class _WaitOver:
    """Step Functions for a wait that is over: every task response fails with ``code``."""

    def __init__(self, code: str) -> None:
        self.code = code

    def send_task_success(self, taskToken: str, output: str) -> None:
        from botocore.exceptions import ClientError

        raise ClientError({"Error": {"Code": self.code, "Message": "Task Timed Out"}}, "SendTaskSuccess")


@pytest.mark.parametrize("code", ["TaskTimedOut", "InvalidToken"])
def test_a_decision_that_reaches_no_waiting_task_is_late_and_gone(aws, ring, api, pending, monkeypatch, code):
    """Issue 12: the table never says approved for a call that did not run; the API and the page answer 410."""
    real = __import__("longstep.clients", fromlist=["client"]).client
    monkeypatch.setattr("longstep.clients.client", lambda service: _WaitOver(code) if service == "stepfunctions" else real(service))
    status, body = api("decide", pending, body={"decision": "approve"})
    assert (status, body["error"]) == (410, "expired")
    stored = ApprovalTable("approvals", aws["ddb"]).get(pending)
    assert stored["status"] == EXPIRED and json.loads(stored["late_decision"])["decision"] == "approve"
    assert json.loads(stored["decision"]) == {"decision": "timeout"}
    status, text, _ = page("GET", "decide", link_for(ring, pending))
    assert status == 410 and "This link has expired" in text


def test_a_page_decision_that_reaches_no_waiting_task_answers_410(aws, ring, pending, monkeypatch):
    real = __import__("longstep.clients", fromlist=["client"]).client
    monkeypatch.setattr("longstep.clients.client", lambda service: _WaitOver("TaskTimedOut") if service == "stepfunctions" else real(service))
    link = link_for(ring, pending)
    _, body, _ = page("GET", "decide", link)
    status, text, _ = page("POST", "decide", link, {**hidden(body), "name": "Alice", "action": "approve"})
    assert status == 410 and "This link has expired" in text and "Your decision was recorded" not in text
    stored = ApprovalTable("approvals", aws["ddb"]).get(pending)
    assert stored["status"] == EXPIRED and json.loads(stored["late_decision"])["approver"] == "Alice (link to oncall@example.com)"


def test_a_decision_is_bound_to_the_arguments_it_was_made_on(aws, ring, api, sfn, pending):
    """Integrity: a page opened before the call's arguments changed decides nothing (409, the page
    again with the new arguments); the decision carries the digest of what it approved, a second
    one is refused, and CallTool runs no arguments other than those of the digest."""
    table = ApprovalTable("approvals", aws["ddb"])
    link = link_for(ring, pending)
    _, old_page, _ = page("GET", "decide", link)
    assert hidden(old_page)["digest"] == arguments_digest(EMAIL) == table.get(pending)["input_digest"]
    # The call is asked for again with other arguments (a replayed turn that changed): asked again, for those.
    changed = {**EMAIL, "to": "everyone@example.com"}
    store = CheckpointStore("checkpoints", aws["ddb"])
    again = approvals.request(
        table, store, RecordingStepFunctions(), run_id=RUN, turn=5, call=0, tool="send_email", tool_input=changed, agent="triage", token="T2"
    )
    assert again == {"approval_id": pending, "status": PENDING} and table.get(pending)["input_digest"] == arguments_digest(changed)

    status, body, _ = page("POST", "decide", link, {**hidden(old_page), "name": "Alice", "action": "approve"})
    assert status == 409 and "changed since you opened this page" in body and "everyone@example.com" in body
    status, answer = api("decide", pending, body={"decision": "approve", "digest": arguments_digest(EMAIL)})
    assert (status, answer["error"], answer["input_digest"]) == (409, "stale", arguments_digest(changed))
    assert table.get(pending)["status"] == PENDING and sfn.sent == []  # nothing was decided

    status, _, _ = page("POST", "decide", link, {**hidden(body), "name": "Alice", "action": "approve"})  # the fresh page
    assert status == 200 and table.get(pending)["status"] == APPROVED
    assert sfn.sent[-1]["output"]["args_digest"] == arguments_digest(changed)  # bound to what was approved
    status, answer = api("decide", pending, body={"decision": "reject", "reason": "late"})
    assert (status, answer["error"], answer["status"]) == (409, "already_decided", APPROVED) and len(sfn.sent) == 1

    # The run's recorded call still has the first arguments: the approval of others does not run them.
    item = {"run_id": RUN, "turn": 5, "call": 0, "tool": "send_email", "approval": True, "decision": sfn.sent[-1]["output"]}
    assert handler("call_tool")(item)["status"] == "error" and scan(aws["ddb"], "outbox") == []


def test_an_escalation_is_answered_in_the_browser_with_the_same_link_safety(aws, ring, sfn, pending):
    """A call whose outcome is unknown (a crash after it may have sent) waits for a person: the run's
    inbox links to its page, which asks in plain words; the answer "it happened: use this result"
    resumes the run once; tampered, expired, reused and foreign links answer nothing."""
    from longstep.humans import waiting

    store = CheckpointStore("checkpoints", aws["ddb"])
    attrs = {"task": "CallTool", "tool": "send_email", "input": EMAIL, "error": "OutcomeUnknownError", "reason": "send_email may have acted"}
    waiting.park(store, RUN, keys.escalation_key(5, 0), "ESCALATION-TOKEN", attrs)
    _, inbox, _ = page("GET", "inbox", ring.sign(links.Capability(links.Scope(runs=(RUN,)), int(clock.now()) + 600, "ops")))
    assert "longstep resolve" not in inbox and "send_email may have acted" in inbox
    (link,) = re.findall(r'href="\.\./escalation/([^"]+)"', inbox)
    assert ring.verify(link, clock.now()).scope.escalation == (RUN, 5, 0, 1)

    status, body, headers = page("GET", "escalation", link, agent=SCANNER)  # opening it answers nothing
    assert status == 200 and headers["Cache-Control"] == "no-store" and sfn.sent == []
    assert "Did this happen? Send an email to payments-oncall@example.com" in body
    assert '<dt>To</dt><dd data-argument="to">' in body and "nobody knows whether it happened" in body  # in the approver's words
    assert (
        "It did not happen: do it now" in body and "It happened: use this result" in body and 'class=\'danger\' name="action" value="abort"' in body
    )
    assert page("POST", "escalation", link, {"name": "Mallory", "action": "abort"})[0] == 403  # no CSRF token
    status, body, _ = page("POST", "escalation", link, {**hidden(body), "name": "Alice", "action": "skip", "result": ""})
    assert status == 400 and "result: type the result the agent should be given" in body and sfn.sent == []
    status, body, _ = page("POST", "escalation", link, {**hidden(body), "name": "Alice", "action": "skip", "result": '{"sent": true}'})
    assert status == 200 and "Result provided" in body
    assert sfn.sent == [{"token": "ESCALATION-TOKEN", "output": {"action": "skip", "result": {"sent": True}, "resolver": "Alice (link to ops)"}}]

    status, body, _ = page("GET", "escalation", link)  # reused: the first answer stands
    assert status == 410 and "already answered" in body and "Alice (link to ops)" in body
    assert page("POST", "escalation", link, {**hidden(body), "name": "Bob", "action": "abort"})[0] in (403, 410) and len(sfn.sent) == 1
    waiting.park(store, RUN, keys.escalation_key(5, 0), "LATER-TOKEN", attrs)  # the step escalates again: a new escalation
    assert page("GET", "escalation", link)[0] == 410  # the old link answers nothing of the new one
    tampered = link[:-2] + ("A" if link[-2] != "A" else "B") + link[-1]
    assert page("GET", "escalation", tampered)[0] == 404
    expired = ring.sign(links.Capability(links.Scope(escalation=(RUN, 5, 0, 2)), int(clock.now()) - 1, "ops"))
    assert page("GET", "escalation", expired)[0] == 410
    assert page("GET", "decide", link)[0] == 404 and page("GET", "escalation", link_for(ring, pending))[0] == 404  # each link its page
    assert len(sfn.sent) == 1


def test_an_approved_call_runs_once_whatever_is_retried(aws, ring, sfn, pending, monkeypatch):
    """Representative points around a decision, the effect counted in the world's own table (the
    outbox): the page's form submitted twice, RequestApproval retried after the decision (its new
    token is handed the same decision), and CallTool invoked again with it (a retried invocation)."""
    link = link_for(ring, pending)
    _, body, _ = page("GET", "decide", link)
    form = {**hidden(body), "name": "Alice", "action": "approve"}
    assert page("POST", "decide", link, form)[0] == 200
    assert page("POST", "decide", link, form)[0] == 410  # the same form again: the first decision stands
    monkeypatch.setattr("longstep.runtime.Runtime.step_functions", lambda self: sfn)
    handler("request_approval")({**load_event("request_approval"), "token": "RETRIED-TOKEN"})
    assert [s["token"] for s in sfn.sent] == [TOKEN, "RETRIED-TOKEN"] and sfn.sent[0]["output"] == sfn.sent[1]["output"]
    item = {"run_id": RUN, "turn": 5, "call": 0, "tool": "send_email", "approval": True, "decision": sfn.sent[1]["output"]}
    results = [handler("call_tool")(item) for _ in range(3)]
    assert [(r["status"], r["replayed"]) for r in results] == [("success", False), ("success", True), ("success", True)]
    assert len(scan(aws["ddb"], "outbox")) == 1  # one email, whatever was retried
