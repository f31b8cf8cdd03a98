"""RequestApproval: a request in the approvals table, its token server-side, a notification
without it; deciding: the first decision wins; retries and timeouts."""

from __future__ import annotations

import json

import pytest
from moto.sns.models import sns_backends

from longstep import keys
from longstep.errors import ApprovalAlreadyDecidedError, ApprovalExpiredError, ApprovalNotFoundError, InvalidInputError
from longstep.humans import requests as approvals
from longstep.humans.decisions import Decision, decide
from longstep.humans.requests import pending_approvals
from longstep.humans.table import ApprovalTable, arguments_digest
from longstep.settings import DEFAULT_APPROVAL_TIMEOUT_SECONDS
from longstep.store import CheckpointStore

from tests.functional.conftest import drive_to, handler, load_event

RUN = "func-run-1"
TOKEN = "EXAMPLE-TASK-TOKEN"


class RecordingStepFunctions:
    """Stands in for the Step Functions client: records the task responses it is sent."""

    def __init__(self) -> None:
        self.sent: list[dict] = []

    def send_task_success(self, taskToken: str, output: str) -> None:
        self.sent.append({"token": taskToken, "output": json.loads(output)})


def notifications(topic: str) -> list[tuple]:
    return sns_backends["123456789012"]["us-east-1"].topics[topic].sent_notifications


@pytest.fixture
def requested(aws):
    """Turn 5 of the triage run asks to send an email: RequestApproval has run once."""
    drive_to(5)
    handler("model_turn")({"run_id": RUN, "next_turn": 5})
    out = handler("request_approval")(load_event("request_approval"))
    assert out["status"] == "pending"
    return {"table": ApprovalTable("approvals", aws["ddb"]), "store": CheckpointStore("checkpoints", aws["ddb"]), "id": out["approval_id"]}


def test_the_request_is_an_item_of_the_approvals_table_named_by_the_run(aws, requested):
    item = requested["table"].get(requested["id"])
    assert len(requested["id"]) >= 22  # token_urlsafe(18): 144 random bits
    assert (item["run_id"], item["turn"], item["call"], item["tool"], item["status"]) == (RUN, 5, 0, "send_email", "pending")
    assert json.loads(item["input"])["to"] == "payments-oncall@example.com"
    assert item["task_token"] == TOKEN
    assert item["expires_at"] - item["requested_at"] == pytest.approx(DEFAULT_APPROVAL_TIMEOUT_SECONDS, abs=1)
    assert item["purge_at"] > item["expires_at"]  # TTL: kept after it is decided
    assert approvals.approval_id_of(requested["store"], RUN, 5, 0) == requested["id"]


def test_the_pending_list_shows_the_call_but_never_the_token(requested):
    (shown,) = pending_approvals(requested["table"], RUN)
    assert (shown["approval_id"], shown["tool"], shown["status"]) == (requested["id"], "send_email", "pending")
    assert shown["requested_at"].endswith("Z") and shown["expires_at"] > shown["requested_at"]
    assert TOKEN not in json.dumps(shown)
    assert pending_approvals(requested["table"], "another-run") == []


def test_approvers_are_notified_once_without_the_token(aws, requested):
    (sent,) = notifications(aws["topic"])
    _, message, subject, attributes, _ = sent
    assert subject == f"Approval needed: send_email in run {RUN}"
    assert requested["id"] in message and "payments-oncall@example.com" in message
    # In the tool's own words, for the people who decide.
    shown = json.loads(json.loads(message)["default"])  # what SQS, Lambda and HTTPS subscribers get
    assert shown["summary"] == 'Send an email to payments-oncall@example.com with the subject "Checkout outage: provider timeout"'
    assert shown["risk"] == "An email cannot be taken back once it is sent."
    assert json.loads(message)["email"].startswith(
        'Send an email to payments-oncall@example.com with the subject "Checkout outage: provider timeout"\nRisk: '
    )
    assert attributes["run_id"]["Value"] == RUN
    assert TOKEN not in json.dumps(sent)
    handler("request_approval")({**load_event("request_approval"), "token": "RETRY-TOKEN"})
    assert len(notifications(aws["topic"])) == 1


def test_a_notification_that_cannot_be_sent_does_not_fail_the_request(aws, monkeypatch):
    from longstep import settings as env

    monkeypatch.setenv(env.ENV_APPROVAL_TOPIC_ARN, aws["topic"] + "-deleted")
    drive_to(5)
    handler("model_turn")({"run_id": RUN, "next_turn": 5})
    out = handler("request_approval")(load_event("request_approval"))
    assert out["status"] == "pending"
    stored = ApprovalTable("approvals", aws["ddb"]).get(out["approval_id"])
    assert stored["status"] == "pending" and "notified_at" not in stored
    assert notifications(aws["topic"]) == []


def test_first_decision_wins_and_resumes_the_task(requested):
    sfn = RecordingStepFunctions()
    shown = decide(requested["table"], sfn, requested["id"], Decision(decision="approve", approver="alice"))
    digest = requested["table"].get(requested["id"])["input_digest"]  # bound to the request's arguments
    assert sfn.sent == [{"token": TOKEN, "output": {"decision": "approve", "approver": "alice", "args_digest": digest}}]
    assert (shown["status"], shown["approver"]) == ("approved", "alice") and shown["decided_at"]
    with pytest.raises(ApprovalAlreadyDecidedError) as err:
        decide(requested["table"], sfn, requested["id"], Decision(decision="reject", reason="late", approver="bob"))
    assert err.value.decision["approver"] == "alice" and err.value.status == "approved"
    assert len(sfn.sent) == 1
    assert pending_approvals(requested["table"], RUN) == []


def test_unknown_approval_is_not_found(requested):
    with pytest.raises(ApprovalNotFoundError):
        decide(requested["table"], RecordingStepFunctions(), "no-such-id", Decision(decision="approve"))


def test_a_retried_request_while_pending_takes_the_new_token(requested):
    handler("request_approval")({**load_event("request_approval"), "token": "NEW-TOKEN"})
    assert requested["table"].get(requested["id"])["task_token"] == "NEW-TOKEN"
    sfn = RecordingStepFunctions()
    decide(requested["table"], sfn, requested["id"], Decision(decision="approve", approver="alice"))
    assert [s["token"] for s in sfn.sent] == ["NEW-TOKEN"]


def test_a_retried_request_after_the_decision_hands_it_to_the_new_token(requested, monkeypatch):
    decide(
        requested["table"],
        RecordingStepFunctions(),
        requested["id"],
        Decision(decision="edit", input={"to": "x@example.com", "subject": "s", "body": "b"}, approver="alice"),
    )
    sfn = RecordingStepFunctions()
    monkeypatch.setattr("longstep.runtime.Runtime.step_functions", lambda self: sfn)
    out = handler("request_approval")({**load_event("request_approval"), "token": "NEW-TOKEN"})
    assert (out["status"], out["approval_id"]) == ("decided", requested["id"])
    assert sfn.sent == [
        {
            "token": "NEW-TOKEN",
            "output": {
                "decision": "edit",
                "input": {"to": "x@example.com", "subject": "s", "body": "b"},
                "approver": "alice",
                "args_digest": arguments_digest({"to": "x@example.com", "subject": "s", "body": "b"}),  # an edit is a new digest
            },
        }
    ]


def test_a_timed_out_request_is_marked_expired_by_call_tool_and_refuses_decisions(requested):
    item = {"run_id": RUN, "turn": 5, "call": 0, "tool": "send_email", "approval": True, "decision": {"decision": "timeout"}}
    assert handler("call_tool")(item)["status"] == "error"
    stored = requested["table"].get(requested["id"])
    assert stored["status"] == "expired" and json.loads(stored["decision"]) == {"decision": "timeout"}
    with pytest.raises(ApprovalExpiredError):
        decide(requested["table"], RecordingStepFunctions(), requested["id"], Decision(decision="approve"))


def test_a_request_past_its_deadline_expires_when_decided(requested):
    table = requested["table"]
    table.clock = lambda: 10**10  # long after expires_at
    assert approvals.get_approval(table, requested["id"])["status"] == "expired"
    assert pending_approvals(table, RUN) == []
    sfn = RecordingStepFunctions()
    with pytest.raises(ApprovalExpiredError):
        decide(table, sfn, requested["id"], Decision(decision="approve"))
    assert sfn.sent == [] and table.get(requested["id"])["status"] == "expired"


def test_a_decision_the_timed_out_task_no_longer_takes_is_recorded_as_expired(requested):
    class TimedOut(RecordingStepFunctions):
        def send_task_success(self, taskToken: str, output: str) -> None:
            error = Exception("Task Timed Out")
            error.response = {"Error": {"Code": "TaskTimedOut"}}  # type: ignore[attr-defined]
            raise error

    with pytest.raises(ApprovalExpiredError):
        decide(requested["table"], TimedOut(), requested["id"], Decision(decision="approve", approver="alice"))
    stored = requested["table"].get(requested["id"])
    assert stored["status"] == "expired" and json.loads(stored["late_decision"])["approver"] == "alice"


class _TaskClosed(RecordingStepFunctions):
    """Step Functions' answer for the token of a stopped execution's wait."""

    def send_task_success(self, taskToken: str, output: str) -> None:
        error = Exception("Task Timed Out")
        error.response = {"Error": {"Code": "TaskTimedOut"}}  # type: ignore[attr-defined]
        raise error


def test_a_decision_that_reached_no_task_is_asked_again_when_the_call_has_no_result(aws, requested, monkeypatch):
    # The execution stopped while the request was pending (a crash, a console stop); the approver
    # decided before a resumed execution asked again: told "expired", nothing ran, nothing was told.
    with pytest.raises(ApprovalExpiredError):
        decide(requested["table"], _TaskClosed(), requested["id"], Decision(decision="approve", approver="alice"))
    sfn = RecordingStepFunctions()
    monkeypatch.setattr("longstep.runtime.Runtime.step_functions", lambda self: sfn)
    out = handler("request_approval")({**load_event("request_approval"), "token": "RESUMED-TOKEN"})
    assert (out["status"], out["approval_id"]) == ("pending", requested["id"]) and sfn.sent == []
    stored = requested["table"].get(requested["id"])
    assert stored["status"] == "pending" and stored["task_token"] == "RESUMED-TOKEN" and "late_decision" not in stored
    assert json.loads(stored["earlier_late_decision"])["approver"] == "alice"
    assert [r["approval_id"] for r in pending_approvals(requested["table"], RUN)] == [requested["id"]]
    decide(requested["table"], sfn, requested["id"], Decision(decision="reject", reason="not today", approver="bob"))
    bound = stored["input_digest"]
    assert sfn.sent == [{"token": "RESUMED-TOKEN", "output": {"decision": "reject", "reason": "not today", "approver": "bob", "args_digest": bound}}]


def test_a_late_decision_for_a_call_with_a_result_hands_the_recorded_timeout(aws, requested, monkeypatch):
    # The wait timed out and the call recorded it: a replay's request is not asked again.
    with pytest.raises(ApprovalExpiredError):
        decide(requested["table"], _TaskClosed(), requested["id"], Decision(decision="approve", approver="alice"))
    requested["store"].put(RUN, keys.tool_step_key(5, 0), {"kind": "tool", "result": {"ok": False}})
    sfn = RecordingStepFunctions()
    monkeypatch.setattr("longstep.runtime.Runtime.step_functions", lambda self: sfn)
    out = handler("request_approval")({**load_event("request_approval"), "token": "REPLAY-TOKEN"})
    assert out["status"] == "decided" and sfn.sent == [{"token": "REPLAY-TOKEN", "output": {"decision": "timeout"}}]
    assert requested["table"].get(requested["id"])["status"] == "expired"


def test_a_second_request_for_the_same_call_reuses_the_first(aws, requested):
    assert keys.approval_key(5, 0) in {i["sk"]["S"] for i in aws["ddb"].scan(TableName="checkpoints")["Items"]}
    assert len(aws["ddb"].scan(TableName="approvals")["Items"]) == 1
    handler("request_approval")({**load_event("request_approval"), "token": "SECOND"})
    assert len(aws["ddb"].scan(TableName="approvals")["Items"]) == 1


def test_missing_token_is_an_input_error(requested):
    event = load_event("request_approval")
    del event["token"]
    with pytest.raises(InvalidInputError, match="token"):
        handler("request_approval")(event)
