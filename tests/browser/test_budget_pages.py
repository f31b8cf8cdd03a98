"""A budget ask in the approvals inbox, decided like any approval: in a real browser (Debian's
chromium, as ``test_approval_pages``) from the inbox and decision pages, and through the approval
API's routes (the function the API Gateway calls, on the local stack).

A run of the test-only ``fleet`` agent has a budget of 400 tokens and asks at half of it: before
turn 2 it has spent 300 tokens and asks for 400 more, then waits for the event ``go`` at turn 2
while the human decides (the virtual clock is held meanwhile). Once approved, its limit is 800:
a second ask at 450 goes unanswered, and before turn 6 (900 spent) the run stops, reason
``budget``; that second ask's request is closed then (410 to a late decision). Every wait is bounded.
"""

from __future__ import annotations

import json
import uuid

import pytest

from longstep import budget, keys, links
from longstep.humans import budget_asks, signals
from longstep.humans.requests import list_approvals
from longstep.humans.table import ApprovalTable
from longstep.store import CheckpointStore
from longstep_kit.local.pages_server import PageServer
from longstep_kit.local.runner import start_input
from longstep_kit.local.scenario import Scenario
from longstep_kit.local.stack import LocalStack
from longstep_kit.testing.wait import wait_execution, wait_until
from tests.browser.driving import WAIT, _fill, _status, _submit, _text, browser, shots  # noqa: F401 - fixtures
from tests.browser.test_approval_pages import _notified_links
from tests.fixtures.agents import fleet
from tests.local.conftest import holds_released

APPROVER = "arn:aws:iam::123456789012:user/carol"


@pytest.fixture(scope="module")
def served():
    from longstep_kit.project import agent_catalog

    context = {"longstep": {"agents": {**agent_catalog().references, "fleet": "tests.fixtures.agents.fleet:build"}}}
    with LocalStack(context=context) as stack, PageServer(stack) as pages:
        yield stack, pages


@pytest.fixture(autouse=True)
def _no_hold_outlives_its_test(served):
    with holds_released(served[0].clock):
        yield


def _scenario() -> Scenario:
    """Ten turns of 150 tokens; turn 2 waits for the event ``go``."""
    turns = {str(t): {"text": f"Turn {t}.", "tool_calls": [{"name": "lookup", "input": {"region": "us"}}]} for t in range(10)}
    turns["2"] = {"text": "Waiting for the go.", "tool_calls": [{"name": "wait_for", "input": {"event": "go", "timeout_seconds": 600}}]}
    turns["10"] = {"text": "All checked."}
    return Scenario.model_validate(
        {"name": "budget-pages", "input": {"goal": "Check every region.", "agent": "fleet", "max_turns": 20}, "turns": turns}
    )


def _store(stack) -> CheckpointStore:
    return CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))


def _table(stack) -> ApprovalTable:
    return ApprovalTable(stack.outputs["ApprovalsTableName"], stack.client("dynamodb"))


def _start_and_wait_for_the_ask(stack, run_id: str) -> tuple[str, dict]:
    """Start a budgeted run (the clock held: a human decides) and wait for its listed ask."""
    payload = {**start_input(stack, _scenario(), run_id), "budget": {"tokens": 400, "ask_at": 0.5}}
    stack.clock.hold()
    arn = stack.client("stepfunctions").start_execution(stateMachineArn=stack.alias_arn, name=run_id, input=json.dumps(payload))["executionArn"]
    (request,) = wait_until("the ask in the inbox", lambda: list_approvals(_table(stack), "pending", run_id), timeout=WAIT)
    return arn, request


def _finish(stack, run_id: str, arn: str) -> dict:
    """Send the ``go`` the run waits for, let time move, and wait for the run's end."""
    sfn, store = stack.client("stepfunctions"), _store(stack)
    wait_until("the wait", lambda: any(r.get("status") == "waiting" for r in store.query_prefix(run_id, keys.SIGNAL_PREFIX)), timeout=WAIT)
    signals.send(store, sfn, run_id, "go", {}, lambda name: fleet.build())
    stack.clock.release()
    return json.loads(wait_execution(sfn, arn, timeout=WAIT)["output"])


def _stopped_at_the_new_limit(stack, run_id: str, output: dict) -> dict:
    """The run spent its allowed 800 and stopped before turn 6; its second ask was closed."""
    assert (output["status"], output["stop_reason"], output["turns"]) == ("STOPPED", "budget", 6)
    asks = budget.pending_asks(_store(stack), run_id)
    assert [a["status"] for a in asks] == ["allowed", "pending"] and asks[1]["limit"] == 800
    assert budget.spend(_store(stack).steps(run_id), None)["tokens"] == 900  # counted from the records
    second = _table(stack).get(asks[1]["approval_id"])
    assert second["tool"] == budget_asks.BUDGET_TOOL and second["status"] == "expired"  # closed at the limit
    return second


def test_a_budget_ask_is_decided_from_the_inbox_in_the_browser(served, browser, shots):  # noqa: F811 - fixtures
    stack, pages = served
    run_id = "budget-page-1"
    arn, request = _start_and_wait_for_the_ask(stack, run_id)
    question = "run budget-page-1 has spent 300 tokens of its 400 tokens; allow 400 tokens more?"
    assert request["tool"] == budget_asks.BUDGET_TOOL and request["input"]["question"] == question
    try:
        inbox = links.Capability(links.Scope(runs=(run_id,)), int(stack.clock.time()) + 3600, "approvers")
        alice = browser()
        alice.get(links.inbox_url(pages.url, pages.keys().sign(inbox)))
        assert question in _text(alice, "#approvals")  # listed with its question, like any approval
        alice.save_screenshot(str(shots / "budget-inbox.png"))
        alice.find_element("css selector", "#approvals a").click()
        wait_until("the decision page", lambda: alice.find_elements("css selector", "#question"), timeout=WAIT)
        link = alice.current_url
        assert _text(alice, "#question") == question and "budget-page-1" in _text(alice, "#run")
        assert not alice.find_elements("css selector", "#edit")  # approved or rejected, never edited
        assert _table(stack).get(request["approval_id"])["status"] == "pending"  # opening it decided nothing
        _fill(alice, "#name", "Alice")
        _submit(alice, "#approve")
        assert _text(alice, "#outcome").startswith("Approved") and "Alice (link to approvers)" in _text(alice, "#approver")
        alice.save_screenshot(str(shots / "budget-approved.png"))

        bob = browser()  # a second visitor on the same link: the first decision stands
        bob.get(link)
        assert "already decided" in _text(bob, "main") and "Alice" in _text(bob, "#approver")
        assert _status(link)[0] == 410
        (ask, *_) = budget.pending_asks(_store(stack), run_id)
        assert ask["status"] == "allowed" and ask["answered_by"] == "Alice (link to approvers)"  # the run counts it
    finally:
        output = _finish(stack, run_id, arn)
    second = _stopped_at_the_new_limit(stack, run_id, output)
    late = pages.decision_link(second["approval_id"])
    assert _status(late)[0] == 410  # the run stopped at its limit: the ask can no longer be decided


def _api(pages, method: str, path: str, body: dict | None = None, query: dict | None = None) -> tuple[int, dict]:
    """One request to the approval API's function, as API Gateway sends it with IAM authorization."""
    resource = path
    event = {
        "resource": resource,
        "path": path,
        "httpMethod": method,
        "headers": {"Content-Type": "application/json"},
        "multiValueHeaders": {"Content-Type": ["application/json"]},
        "queryStringParameters": query,
        "multiValueQueryStringParameters": {k: [v] for k, v in (query or {}).items()} or None,
        "pathParameters": None,
        "stageVariables": None,
        "requestContext": {
            "resourcePath": resource,
            "httpMethod": method,
            "path": f"/v1{path}",
            "stage": "v1",
            "requestId": str(uuid.uuid4()),
            "identity": {"sourceIp": "127.0.0.1", "userArn": APPROVER, "caller": "AIDACAROL"},
        },
        "body": json.dumps(body) if body is not None else None,
        "isBase64Encoded": False,
    }
    answer = pages.invoke(event)
    return answer["statusCode"], json.loads(answer["body"])


def test_a_budget_ask_is_listed_and_decided_once_through_the_api(served):
    stack, pages = served
    run_id = "budget-api-1"
    sqs = stack.client("sqs")
    queue_url = sqs.create_queue(QueueName="budget-approvers")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    stack.client("sns").subscribe(TopicArn=stack.outputs["ApprovalTopicArn"], Protocol="sqs", Endpoint=queue_arn)
    arn, request = _start_and_wait_for_the_ask(stack, run_id)
    approval_id = request["approval_id"]
    try:
        # Approvers hear of the ask as of any request, with its decision page's signed link.
        assert _notified_links(stack, queue_url, approval_id).startswith(pages.url + "pages/decide/")
        status, listed = _api(pages, "GET", "/approvals", query={"run_id": run_id})
        assert status == 200 and [a["approval_id"] for a in listed["approvals"]] == [approval_id]
        assert listed["approvals"][0]["input"]["question"] == "run budget-api-1 has spent 300 tokens of its 400 tokens; allow 400 tokens more?"
        decide = f"/approvals/{approval_id}/decision"
        status, refused = _api(pages, "POST", decide, {"decision": "edit", "input": {"tokens": 10_000}})
        assert (status, refused["field"]) == (400, "decision")  # a budget ask is not edited
        status, refused = _api(pages, "POST", decide, {"decision": "reject"})
        assert (status, refused["field"]) == (400, "reason")
        assert _table(stack).get(approval_id)["status"] == "pending"  # nothing was decided
        status, decided = _api(pages, "POST", decide, {"decision": "approve"})
        assert status == 200 and decided["status"] == "approved" and decided["approver"] == APPROVER
        status, again = _api(pages, "POST", decide, {"decision": "reject", "reason": "too late"})
        assert status == 409 and again["status"] == "approved"  # the first decision stands
        (ask,) = budget.pending_asks(_store(stack), run_id)
        assert ask["status"] == "allowed" and ask["answered_by"] == APPROVER
    finally:
        output = _finish(stack, run_id, arn)
    second = _stopped_at_the_new_limit(stack, run_id, output)
    status, gone = _api(pages, "POST", f"/approvals/{second['approval_id']}/decision", {"decision": "approve"})
    assert status == 410 and gone["status"] == "expired"
