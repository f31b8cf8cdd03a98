# ruff: noqa: F811 - the fixtures of driving.py are imported and requested by name
"""The approval pages in a real browser: headless Chromium (Debian's ``chromium``) driven by Selenium
through the system chromedriver (``chromium-driver``), against the local stack's page server.

A triage run is started with nobody answering in-process; its approval notifications (read from an
SQS queue subscribed to the topic, as any subscriber would) carry the links. The browser opens the
first, checks the arguments, tries an edit that the tool's schema refuses (the field is named,
nothing is decided), fixes it and submits; a second browser session on the same link sees who
decided; the second request is approved; the run finishes with the edited call. Then a run whose
model fails for good escalates: the browser opens its inbox, follows the Answer link and provides
the result, and the run finishes with it. An expired link
shows the expiry page (410) and a scanner's GET decides nothing. Every wait is bounded; the
virtual clock is held while a request waits for the browser (a person is deciding), so its
timeout cannot fire meanwhile.

Nothing is downloaded: ``make setup`` installs chromium and chromium-driver with apt when they are
missing. Without them these tests FAIL (they are part of ``make test``), they never skip.
Screenshots go to $LONGSTEP_SCREENSHOTS when set (docs/images is made that way), else to tmp.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from pathlib import Path

import pytest

from longstep import links
from longstep.humans import requests as approvals
from longstep.humans.table import PENDING, ApprovalTable
from longstep.store import CheckpointStore
from longstep_kit.local.pages_server import PageServer
from longstep_kit.local.resources import agent_tables
from longstep_kit.local.runner import RunOptions, run_scenario
from longstep_kit.local.scenario import Scenario, load_scenario
from longstep_kit.local.stack import LocalStack
from tests.browser.driving import WAIT, _fill, _status, _submit, _text, browser, shots  # noqa: F401 - fixtures

SCENARIO = Path(__file__).resolve().parents[2] / "events" / "scenarios" / "triage.json"
RUN = "browser-run-1"
SCANNER = "Mozilla/5.0 (compatible; Proofpoint URL Defense link scanner)"


def _table(stack) -> ApprovalTable:
    return ApprovalTable(stack.outputs["ApprovalsTableName"], stack.client("dynamodb"))


@pytest.fixture(scope="module")
def served():
    with LocalStack() as stack, PageServer(stack) as pages:
        yield stack, pages


def _notified_links(stack, queue_url: str, approval_id: str) -> str:
    """The decision link of ``approval_id`` from the notifications in the queue (bounded)."""
    sqs = stack.client("sqs")
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        for message in sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", []):
            view = json.loads(json.loads(message["Body"])["Message"])
            if view["approval_id"] == approval_id:
                return view["decision_url"]
    raise AssertionError(f"no notification for {approval_id}")


def test_decide_in_the_browser_and_the_run_finishes_with_the_edited_call(served, browser, shots):
    stack, pages = served
    sqs = stack.client("sqs")
    queue_url = sqs.create_queue(QueueName="approvers")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    stack.client("sns").subscribe(TopicArn=stack.outputs["ApprovalTopicArn"], Protocol="sqs", Endpoint=queue_arn)
    requested: queue.Queue[str] = queue.Queue()

    def on_invoke(inv):
        if inv.task == "request_approval" and inv.error is None and inv.result.get("status") == "pending":
            stack.clock.hold()  # a person is deciding: the request's timeout must not fire meanwhile
            requested.put(inv.result["approval_id"])

    stack.dispatcher.after_invoke.append(on_invoke)
    report: dict = {}
    scenario = load_scenario(SCENARIO)
    holds = 0
    runner = threading.Thread(
        target=lambda: report.update(run_scenario(stack, scenario, RunOptions(approve="external", run_id=RUN, timeout_seconds=240)))
    )
    runner.start()
    try:
        first = requested.get(timeout=WAIT)
        holds += 1
        link = _notified_links(stack, queue_url, first)
        assert link.startswith(pages.url + "pages/decide/")

        alice = browser()
        alice.get(link)
        assert _text(alice, "#summary").startswith("Send an email to payments-oncall@example.com")  # the tool's summary
        assert "cannot be taken back" in _text(alice, "#risk") and "at_most_once" not in _text(alice, "main")
        assert [e.get_attribute("data-argument") for e in alice.find_elements("css selector", "#arguments dd")] == ["to", "subject", "body"]
        assert _text(alice, "#arguments dd[data-argument=to]") == "payments-oncall@example.com"  # text, not JSON
        assert _text(alice, "#model-text") == "Telling payments on-call."  # the agent's reason: its text before the call
        assert "Triage the checkout incident" in _text(alice, "#goal") and _text(alice, "#agent") == "triage"
        assert _text(alice, "#requested").endswith("ago)") and "left to decide" in _text(alice, "#time-left")
        assert alice.find_element("css selector", "#reject").value_of_css_property("background-color") == "rgba(160, 0, 0, 1)"
        alice.save_screenshot(str(shots / "approval-pending.png"))
        alice.set_window_size(390, 1400)  # a phone's width: nothing wider than the screen
        assert alice.execute_script("return document.documentElement.scrollWidth") <= alice.execute_script("return window.innerWidth")
        alice.save_screenshot(str(shots / "approval-phone.png"))
        alice.set_window_size(1000, 1300)

        alice.find_element("css selector", "#edit-details summary").click()  # the form of the tool's arguments
        _fill(alice, "#name", "Alice")
        _fill(alice, "#arg-to", "not-an-address")
        _submit(alice, "#edit")
        assert "To (input.to): is not in the expected form" in _text(alice, "#error")  # the field is named, in words
        assert "^" not in _text(alice, "#error") and _table(stack).get(first)["status"] == PENDING  # nothing was decided
        assert alice.find_element("css selector", "#arg-to").get_attribute("aria-invalid") == "true"
        alice.execute_script("document.getElementById('arg-to').scrollIntoView({block: 'center'})")
        alice.save_screenshot(str(shots / "approval-invalid-edit.png"))
        _fill(alice, "#name", "Alice")
        _fill(alice, "#arg-to", "payments-lead@example.com")
        _submit(alice, "#edit")
        assert _text(alice, "#outcome").startswith(
            "Approved with changes: Send an email to payments-lead@example.com"
        ) and "Alice (link to approvers)" in _text(alice, "#approver")
        assert _text(alice, "#ran dd[data-argument=to]") == "payments-lead@example.com"  # the arguments that ran
        alice.save_screenshot(str(shots / "approval-decided.png"))

        bob = browser()  # a second visitor on the same link sees the first decision
        bob.get(link)
        assert "already decided" in _text(bob, "main") and "Alice" in _text(bob, "#approver")
        assert _status(link)[0] == 410

        stack.clock.release()  # decided: time may move again
        holds -= 1
        second = requested.get(timeout=WAIT)
        holds += 1
        bob.get(_notified_links(stack, queue_url, second))
        _fill(bob, "#name", "Bob")
        _submit(bob, "#approve")
        assert _text(bob, "#outcome").startswith("Approved")
        stack.clock.release()
        holds -= 1
    finally:
        for _ in range(holds):  # a failed step above: let the run time out instead of hanging
            stack.clock.release()
        runner.join(timeout=WAIT * 2)
        stack.dispatcher.after_invoke.remove(on_invoke)
    assert not runner.is_alive() and report["status"] == "SUCCEEDED", report.get("status")
    outbox = agent_tables(stack, "triage")["outbox"]
    sent = [item["to"]["S"] for item in stack.client("dynamodb").scan(TableName=outbox)["Items"]]
    assert "payments-lead@example.com" in sent and "payments-oncall@example.com" not in sent  # the edited call ran
    _answer_an_escalation_in_the_browser(stack, pages, alice, shots)


ONE_TURN = Scenario.model_validate(
    {"name": "one-turn", "input": {"goal": "Say what you found.", "agent": "triage", "max_turns": 3}, "turns": {"0": {"text": "Nothing new."}}}
)


def _answer_an_escalation_in_the_browser(stack, pages, driver, shots) -> None:
    """The same path for an escalation: a run whose model fails for good waits for a person, who
    opens the run's inbox, follows its Answer link, provides the result, and the run finishes
    with it."""
    from longstep.humans import escalations
    from longstep_kit.local.faults import Fault
    from longstep_kit.testing.wait import wait_until

    run_id, given = "browser-escalation", "Nothing new, said a person."
    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
    report: dict = {}
    options = RunOptions(approve="external", run_id=run_id, faults=[Fault("permanent", 0)], timeout_seconds=240)
    runner = threading.Thread(target=lambda: report.update(run_scenario(stack, ONE_TURN, options)))
    stack.clock.hold()  # a person is answering: the escalation's timeout must not fire meanwhile
    runner.start()
    try:
        wait_until("the escalation", lambda: escalations.pending_escalations(store, run_id), timeout=WAIT)
        inbox = links.Capability(links.Scope(runs=(run_id,)), int(stack.clock.time()) + 3600, "approvers")
        driver.get(links.inbox_url(pages.url, pages.keys().sign(inbox)))
        driver.find_element("css selector", "#escalations a").click()
        wait_until("the escalation page", lambda: driver.find_elements("css selector", "#result"), timeout=WAIT)
        assert _text(driver, "#summary") == "The agent's model could not reply" and "Stop the run" in _text(driver, "#abort")
        driver.save_screenshot(str(shots / "escalation-pending.png"))
        _fill(driver, "#name", "Alice")
        _fill(driver, "#result", given)
        _submit(driver, "#skip")
        assert _text(driver, "#outcome") == "Result provided" and _text(driver, "#approver") == "Alice (link to approvers)"
        driver.save_screenshot(str(shots / "escalation-answered.png"))
    finally:
        stack.clock.release()  # answered (or a step above failed: the escalation may time out instead of hanging)
        runner.join(timeout=WAIT * 2)
    assert not runner.is_alive() and (report["status"], report["output"]) == ("SUCCEEDED", given)  # the run went on with it


def _pending_request(stack, run_id: str) -> str:
    """A pending request made through the runtime, as RequestApproval makes it (no run needed)."""

    class _NoTasks:
        def send_task_success(self, **kwargs):
            raise AssertionError("nothing may be decided")

    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
    out = approvals.request(
        _table(stack),
        store,
        _NoTasks(),
        run_id=run_id,
        turn=1,
        call=0,
        tool="send_email",
        tool_input={"to": "a@example.com", "subject": "s", "body": "b"},
        agent="triage",
        token="scanner-test-token",
    )
    return out["approval_id"]


def test_a_scanners_get_decides_nothing(served):
    stack, pages = served
    approval_id = _pending_request(stack, "scanned-run")
    link = pages.decision_link(approval_id)
    for _ in range(3):
        status, headers = _status(link, SCANNER)
        assert status == 200 and headers["Cache-Control"] == "no-store" and "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    assert _table(stack).get(approval_id)["status"] == PENDING


def test_an_expired_link_shows_the_expiry_page(served, browser, shots):
    stack, pages = served
    approval_id = _pending_request(stack, "expired-link-run")
    expired = links.Capability(links.Scope(approval=approval_id), int(stack.clock.time()) - 1, "approvers")
    link = links.decision_url(pages.url, pages.keys().sign(expired))
    assert _status(link)[0] == 410
    driver = browser()
    driver.get(link)
    assert _text(driver, "#outcome") == "This link has expired"
    driver.save_screenshot(str(shots / "approval-expired.png"))


def test_interactive_runs_print_the_link(served, monkeypatch, capsys):
    from longstep.store import CheckpointStore
    from longstep_kit.local.runner import choose_decision

    stack, pages = served
    approval_id = _pending_request(stack, "interactive-run")
    request = approvals.get_approval(_table(stack), approval_id)
    monkeypatch.setattr("builtins.input", lambda prompt: "")  # Enter: "decided in the browser"
    scenario = load_scenario(SCENARIO)
    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
    assert choose_decision(scenario, store, request, RunOptions(approve="interactive", page_link=pages.decision_link)) is None
    (link,) = [line.split(": ", 1)[1] for line in capsys.readouterr().err.splitlines() if line.startswith("decide in a browser: ")]
    assert _status(link)[0] == 200


ATTACKER_PAGE = """<!doctype html><title>loading</title><script>
const out = {};
async function attempt(name, request) {
  try { const r = await request(); out[name] = r.type === "opaque" ? "sent, unreadable" : "read " + r.status; }
  catch (e) { out[name] = "blocked"; }
}
(async () => {
  await attempt("secrets", () => fetch(API + "/", {method: "POST", body: "{}",
    headers: {"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": "secretsmanager.ListSecrets"}}));
  await attempt("clock", () => fetch(API + "/_longstep/clock", {method: "POST", mode: "no-cors", body: '{"seconds": 864000}'}));
  await attempt("decide", () => fetch(PAGES + "pages/decide/forged", {method: "POST", mode: "no-cors",
    headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: "name=m&action=approve"}));
  document.body.textContent = JSON.stringify(out);
  document.title = "done";
})();
</script>"""


def test_a_page_of_another_origin_cannot_read_the_key_move_the_clock_or_post_a_decision(served, browser):
    """A page open in the developer's browser (another local port: same site, another origin)
    tries the served endpoint and the pages: the preflight is refused (nothing readable), the
    no-cors posts reach the doors and are refused there. The pages' own form posts of the tests
    above were all let in."""
    import http.server

    from selenium.webdriver.support.ui import WebDriverWait

    from longstep_kit.local.serve import LocalServer, free_port

    stack, pages = served
    assert list(pages.door.refused) == []  # every request of the earlier tests (their form posts too) was answered
    endpoint = LocalServer(stack, port=free_port())
    endpoint.start()
    page = ATTACKER_PAGE.replace("<script>", f"<script>const API = {json.dumps(endpoint.endpoint_url)}; const PAGES = {json.dumps(pages.url)};")

    class Attacker(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            body = page.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    attacker = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Attacker)
    threading.Thread(target=attacker.serve_forever, daemon=True).start()
    try:
        driver = browser()
        driver.get(f"http://127.0.0.1:{attacker.server_address[1]}/")
        WebDriverWait(driver, WAIT).until(lambda d: d.title == "done")
        out = json.loads(driver.find_element("tag name", "body").text)
    finally:
        attacker.shutdown()
        attacker.server_close()
        endpoint.stop()
    assert out["secrets"] == "blocked", out  # the preflight got a 403 without CORS headers
    assert out["clock"] == out["decide"] == "sent, unreadable", out  # simple requests go out; the doors refuse them
    assert len(endpoint.door.refused) == 2 and all(reason.startswith("Origin 'http://127.0.0.1:") for reason in endpoint.door.refused)
    assert len(pages.door.refused) == 1 and pages.door.refused[0].startswith("Origin")
