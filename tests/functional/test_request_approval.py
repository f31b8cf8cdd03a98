"""RequestApproval and deciding: the token stays server-side; the first decision wins."""

from __future__ import annotations

import json

import pytest

from longstep.approvals import ApprovalAlreadyDecidedError, ApprovalNotFoundError, Decision, decide, pending_approvals
from longstep.errors import InvalidInputError
from longstep.store import CheckpointStore

from tests.functional.conftest import drive_to, handler, load_event


class RecordingStepFunctions:
    """Stands in for the Step Functions client: records the task responses it is sent."""

    def __init__(self) -> None:
        self.sent: list[dict] = []

    def send_task_success(self, taskToken: str, output: str) -> None:
        self.sent.append({"token": taskToken, "output": json.loads(output)})


@pytest.fixture
def pending(aws):
    drive_to(5)
    handler("model_turn")({"run_id": "func-run-1", "next_turn": 5})
    out = handler("request_approval")(load_event("request_approval"))
    assert out["status"] == "pending"
    return CheckpointStore("checkpoints", aws["ddb"])


def test_pending_list_shows_the_call_but_never_the_token(pending):
    (request,) = pending_approvals(pending, "func-run-1")
    assert request["tool"] == "send_email" and request["input"]["to"] == "payments-oncall@example.com"
    assert "EXAMPLE-TASK-TOKEN" not in json.dumps(request)


def test_first_decision_wins_and_resumes_the_task(pending):
    sfn = RecordingStepFunctions()
    decide(pending, sfn, "func-run-1", 5, 0, Decision(decision="approve", approver="alice"))
    assert sfn.sent == [{"token": "EXAMPLE-TASK-TOKEN", "output": {"decision": "approve", "approver": "alice"}}]
    with pytest.raises(ApprovalAlreadyDecidedError) as err:
        decide(pending, sfn, "func-run-1", 5, 0, Decision(decision="reject", reason="late", approver="bob"))
    assert err.value.decision["approver"] == "alice"
    assert len(sfn.sent) == 1
    assert pending_approvals(pending, "func-run-1") == []


def test_unknown_approval_is_not_found(pending):
    with pytest.raises(ApprovalNotFoundError):
        decide(pending, RecordingStepFunctions(), "func-run-1", 9, 0, Decision(decision="approve"))


def test_a_retried_request_after_the_decision_hands_it_to_the_new_token(pending, monkeypatch):
    decide(pending, RecordingStepFunctions(), "func-run-1", 5, 0, Decision(decision="approve", approver="alice"))
    sfn = RecordingStepFunctions()
    monkeypatch.setattr("longstep.runtime.Runtime.step_functions", lambda self: sfn)
    event = load_event("request_approval")
    event["token"] = "NEW-TOKEN"
    assert handler("request_approval")(event)["status"] == "decided"
    assert sfn.sent == [{"token": "NEW-TOKEN", "output": {"decision": "approve", "approver": "alice"}}]


def test_missing_token_is_an_input_error(pending):
    event = load_event("request_approval")
    del event["token"]
    with pytest.raises(InvalidInputError, match="token"):
        handler("request_approval")(event)
