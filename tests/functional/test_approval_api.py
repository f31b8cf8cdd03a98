"""The approval API Lambda, driven with API Gateway REST events (events/lambda/approval_api_*.json)
on moto: each status code, each decision kind, the approver's identity, the run filter, signals,
and never a task token in a response."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from longstep import clients, keys
from longstep.humans import requests as approvals, signals
from longstep.humans.table import ApprovalTable, arguments_digest
from longstep.errors import InvalidInputError
from longstep.models.base import ModelReply
from longstep.store import CheckpointStore

from tests.functional.conftest import handler, load_event, scan

RUN = "func-run-1"
OTHER_RUN = "func-run-2"
TOKEN = "EXAMPLE-TASK-TOKEN"
ALICE = "arn:aws:sts::123456789012:assumed-role/LongstepApprovers/alice"
EMAIL = {"to": "payments-oncall@example.com", "subject": "Checkout incident", "body": "The provider timed out."}


class RecordingStepFunctions:
    """Stands in for Step Functions: records the task responses the API sends."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def send_task_success(self, taskToken: str, output: str) -> None:
        answer = json.loads(output)
        # A signal's entry key and its waiter, for the call that receives it (test_waits).
        answer.pop("entry", None)
        answer.pop("to", None)
        self.sent.append({"token": taskToken, "output": answer})


@pytest.fixture
def sfn(monkeypatch):
    recorder = RecordingStepFunctions()
    real = clients.client
    monkeypatch.setattr(clients, "client", lambda service: recorder if service == "stepfunctions" else real(service))
    return recorder


@pytest.fixture
def api(aws, sfn):
    """Call the API Lambda: ``api(sample, approval_id=..., body=..., query=..., identity=...)`` -> (status, body).

    Every response is checked for task tokens: none may ever carry one.
    """
    tokens = {TOKEN}

    def call(
        sample: str,
        approval_id: str | None = None,
        body: Any = ...,
        query: Any = ...,
        identity: dict | None = None,
        raw_body: str | None = None,
        **path: str,
    ) -> tuple[int, Any]:
        event = copy.deepcopy(load_event(f"approval_api_{sample}"))
        if approval_id is not None:
            event["path"] = event["path"].replace("APPROVAL-ID", approval_id)
            event["pathParameters"]["approval_id"] = approval_id
        for name, value in path.items():
            event["path"] = event["path"].replace(event["pathParameters"][name], value)
            event["pathParameters"][name] = value
        if body is not ...:
            event["body"] = None if body is None else json.dumps(body)
        if raw_body is not None:
            event["body"] = raw_body
        if query is not ...:
            event["queryStringParameters"] = query
            event["multiValueQueryStringParameters"] = {k: [v] for k, v in query.items()} if query else None
        if identity is not None:
            event["requestContext"]["identity"].update(identity)
        response = handler("approval_api")(event)
        for token in tokens:
            assert token not in json.dumps(response), "a task token in a response"
        return response["statusCode"], json.loads(response["body"])

    call.tokens = tokens  # type: ignore[attr-defined]
    return call


@pytest.fixture
def pending(aws, api):
    """Turn 5 of a triage run asks to send an email, and RequestApproval ran.

    The run is started and turn 5's reply recorded directly (the earlier turns do not matter here:
    test_request_approval.py drives them through the handlers).
    """
    handler("init_run")(load_event("init_run"))
    message = {
        "role": "assistant",
        "content": [{"text": "Emailing on-call."}, {"toolUse": {"toolUseId": "t5c0", "name": "send_email", "input": EMAIL}}],
    }
    reply = ModelReply(message=message, stop_reason="tool_use").to_record()
    CheckpointStore("checkpoints", aws["ddb"]).record_step(RUN, keys.model_step_key(5), "model", "converse", reply)
    out = handler("request_approval")(load_event("request_approval"))
    return out["approval_id"]


def _request(aws, run_id: str, turn: int = 0, call: int = 0, token: str = "OTHER-TOKEN") -> str:
    """A request made straight through the runtime (for a second run, without driving it)."""
    out = approvals.request(
        ApprovalTable("approvals", aws["ddb"]),
        CheckpointStore("checkpoints", aws["ddb"]),
        RecordingStepFunctions(),
        run_id=run_id,
        turn=turn,
        call=call,
        tool="send_email",
        tool_input=EMAIL,
        agent="triage",
        token=token,
    )
    return out["approval_id"]


def _stored(aws, approval_id: str) -> dict[str, Any]:
    return ApprovalTable("approvals", aws["ddb"]).get(approval_id)


# -- reading ---------------------------------------------------------------------------------


def test_list_shows_pending_requests_filtered_by_run(aws, api, pending):
    other = _request(aws, OTHER_RUN, token="OTHER-RUN-TOKEN")
    api.tokens.add("OTHER-RUN-TOKEN")
    status, body = api("list")  # the sample asks for run_id=func-run-1
    assert status == 200
    assert [(a["approval_id"], a["run_id"], a["turn"], a["call"]) for a in body["approvals"]] == [(pending, RUN, 5, 0)]
    status, body = api("list", query=None)
    assert status == 200 and {a["approval_id"] for a in body["approvals"]} == {pending, other}
    status, body = api("list", query={"run_id": "nobody"})
    assert (status, body["approvals"]) == (200, [])


def test_list_by_status_shows_decided_requests(api, pending):
    api("decide", pending)
    status, body = api("list", query={"run_id": RUN, "status": "approved"})
    assert status == 200 and [a["approval_id"] for a in body["approvals"]] == [pending]
    assert api("list", query={"run_id": RUN})[1]["approvals"] == []


def test_get_returns_the_request(api, pending):
    status, body = api("get", pending)
    assert status == 200
    assert (body["approval_id"], body["status"], body["tool"], body["input"]["to"]) == (pending, "pending", "send_email", EMAIL["to"])
    assert body["decision"] is None and body["approver"] is None and body["expires_at"] > body["requested_at"]
    assert "task_token" not in body


def test_unknown_id_is_404(api, aws):
    for sample in ("get", "decide"):
        for approval_id in ("no-such-approval", "x" * 300, "not%20an%20id"):
            status, body = api(sample, approval_id)
            assert (status, body["error"]) == (404, "not_found"), (sample, approval_id)


# -- deciding ------------------------------------------------------------------------------------


def test_approve_records_the_callers_identity_and_resumes_the_run(aws, api, sfn, pending):
    status, body = api("decide", pending, body={"decision": "approve"})
    assert status == 200
    decided = {"decision": "approve", "approver": ALICE, "args_digest": arguments_digest(EMAIL)}  # bound to the arguments approved
    assert (body["status"], body["approver"], body["decision"]) == ("approved", ALICE, decided)
    assert sfn.sent == [{"token": TOKEN, "output": decided}]
    stored = _stored(aws, pending)
    assert (stored["status"], stored["approver"]) == ("approved", ALICE) and stored["decided_at"] >= stored["requested_at"]


def test_without_a_user_arn_the_caller_is_the_approver(api, sfn, pending):
    status, body = api("decide", pending, identity={"userArn": None, "caller": "AIDAEXAMPLEUSER"})
    assert (status, body["approver"]) == (200, "AIDAEXAMPLEUSER")


def test_a_request_with_no_identity_is_refused(aws, api, sfn, pending):
    status, body = api("decide", pending, identity={"userArn": None, "caller": None})
    assert (status, body["error"]) == (403, "forbidden")
    assert sfn.sent == [] and _stored(aws, pending)["status"] == "pending"


def test_reject_with_a_reason(aws, api, sfn, pending):
    status, body = api("decide", pending, body={"decision": "reject", "reason": "wrong audience"})
    assert status == 200 and body["status"] == "rejected"
    assert sfn.sent[0]["output"] == {"decision": "reject", "reason": "wrong audience", "approver": ALICE, "args_digest": arguments_digest(EMAIL)}
    # The model is told, as the call's result; nothing is sent.
    item = {"run_id": RUN, "turn": 5, "call": 0, "tool": "send_email", "approval": True, "decision": sfn.sent[0]["output"]}
    assert handler("call_tool")(item)["status"] == "error"
    assert scan(aws["ddb"], "outbox") == []


def test_edit_with_valid_arguments_is_what_runs(aws, api, sfn, pending):
    edited = {**EMAIL, "subject": "Action needed: checkout incident"}
    status, body = api("decide", pending, body={"decision": "edit", "input": edited, "reason": "clearer subject"})
    assert status == 200 and (body["status"], body["decision"]["input"]) == ("edited", edited)
    item = {"run_id": RUN, "turn": 5, "call": 0, "tool": "send_email", "approval": True, "decision": sfn.sent[0]["output"]}
    assert handler("call_tool")(item)["status"] == "success"
    (sent,) = scan(aws["ddb"], "outbox")
    assert sent["subject"]["S"] == "Action needed: checkout incident"


# One moto account serves each list of cases below (its setup is most of a test's time).
EDITS_THE_TOOL_REFUSES = [
    ({"to": "payments-oncall@example.com", "body": "no subject"}, "input.subject"),
    ({**EMAIL, "to": "not an address"}, "input.to"),
    ({**EMAIL, "subject": ""}, "input.subject"),
]


def test_edit_with_arguments_the_tool_refuses_is_400_naming_the_field_and_writes_nothing(aws, api, sfn, pending):
    before = _stored(aws, pending)
    for arguments, field in EDITS_THE_TOOL_REFUSES:
        status, body = api("decide", pending, body={"decision": "edit", "input": arguments})
        assert (status, body["error"], body["field"]) == (400, "bad_request", field), arguments
        assert body["message"].startswith(f"{field}: ") and field in body["fields"] and "^[^@" not in body["message"]
    # Every refused argument has its own message, in the tool's order.
    status, body = api("decide", pending, body={"decision": "edit", "input": {**EMAIL, "to": "x", "subject": ""}})
    assert (status, body["fields"]) == (
        400,
        {"input.to": "is not in the expected form (an email address, like name@example.com)", "input.subject": "cannot be empty"},
    )
    assert _stored(aws, pending) == before and sfn.sent == []


MALFORMED_DECISIONS = [
    (..., "{not json", "body"),
    (["approve"], None, "body"),
    (None, None, "body"),
    ({}, None, "decision"),
    ({"decision": "maybe"}, None, "decision"),
    ({"decision": 1}, None, "decision"),
    ({"decision": "reject"}, None, "reason"),
    ({"decision": "reject", "reason": "   "}, None, "reason"),
    ({"decision": "edit"}, None, "input"),
    ({"decision": "edit", "input": "to: bob"}, None, "input"),
    ({"decision": "approve", "input": EMAIL}, None, "input"),
    ({"decision": "approve", "approver": "someone-else"}, None, "approver"),
    ({"decision": "approve", "reason": "x" * 2001}, None, "reason"),
]


def test_a_malformed_body_is_400_naming_the_field(aws, api, sfn, pending):
    for body, raw, field in MALFORMED_DECISIONS:
        status, answer = api("decide", pending, body=body, raw_body=raw)
        assert (status, answer["error"], answer["field"]) == (400, "bad_request", field), (body, raw, answer)
        assert field in answer["message"]
    assert _stored(aws, pending)["status"] == "pending" and sfn.sent == []


def test_a_malformed_query_is_400_naming_the_field(api):
    for query, field in (({"status": "maybe"}, "status"), ({"run_id": "bad id!"}, "run_id")):
        status, body = api("list", query=query)
        assert (status, body["field"]) == (400, field)


def test_a_second_decision_is_409_with_the_first(aws, api, sfn, pending):
    assert api("decide", pending, body={"decision": "reject", "reason": "no"})[0] == 200
    bob = "arn:aws:sts::123456789012:assumed-role/LongstepApprovers/bob"
    status, body = api("decide", pending, body={"decision": "approve"}, identity={"userArn": bob})
    assert status == 409
    assert (body["error"], body["status"]) == ("already_decided", "rejected")
    assert body["decision"] == {"decision": "reject", "reason": "no", "approver": ALICE, "args_digest": arguments_digest(EMAIL)}
    assert len(sfn.sent) == 1 and _stored(aws, pending)["approver"] == ALICE


def test_a_timed_out_request_is_410(aws, api, sfn, pending):
    # The RequestApproval task timed out: the state machine hands CallTool {"decision": "timeout"}.
    item = {"run_id": RUN, "turn": 5, "call": 0, "tool": "send_email", "approval": True, "decision": {"decision": "timeout"}}
    handler("call_tool")(item)
    status, body = api("decide", pending)
    assert (status, body["error"], body["status"]) == (410, "expired", "expired")
    assert api("get", pending)[1]["status"] == "expired"
    assert sfn.sent == []


def test_a_request_past_its_deadline_is_410_even_before_the_run_noticed(aws, api, sfn, pending):
    aws["ddb"].update_item(
        TableName="approvals",
        Key={"approval_id": {"S": pending}},
        UpdateExpression="SET expires_at = :past",
        ExpressionAttributeValues={":past": {"N": "1000"}},
    )
    assert api("get", pending)[1]["status"] == "expired"
    status, body = api("decide", pending)
    assert (status, body["error"]) == (410, "expired")
    assert sfn.sent == [] and _stored(aws, pending)["status"] == "expired"


def test_no_response_carries_a_task_token(aws, api, pending):
    """Every route, every outcome: the ``api`` fixture checks each response for the token."""
    other = _request(aws, OTHER_RUN, token="OTHER-RUN-TOKEN")
    api.tokens.add("OTHER-RUN-TOKEN")
    answers = [api("list"), api("list", query=None), api("get", pending), api("get", other)]
    answers += [api("decide", pending), api("decide", pending), api("decide", other, body={"decision": "reject", "reason": "no"})]
    answers += [api("list", query={"status": "approved"}), api("list", query={"status": "rejected"})]
    assert [status for status, _ in answers] == [200, 200, 200, 200, 200, 409, 200, 200, 200]
    assert "EXAMPLE-TASK-TOKEN" in json.dumps(scan(aws["ddb"], "approvals"))  # it is there, server-side


# -- signals ---------------------------------------------------------------------------------------


@pytest.fixture
def started(aws):
    """The run the signals go to, started (a signal to no run is refused unless buffered)."""
    handler("init_run")(load_event("init_run"))
    return RUN


def test_a_signal_before_the_wait_is_kept_and_taken_by_it(aws, api, started):
    status, body = api("signal")
    assert (status, body) == (200, {"run_id": RUN, "event": "ci_finished", "outcome": "buffered"})
    store, sfn = CheckpointStore("checkpoints", aws["ddb"]), RecordingStepFunctions()
    assert signals.register_waiter(store, sfn, RUN, "ci_finished", {"status": "green"}, "WAIT-TOKEN") == "consumed"
    assert sfn.sent == [{"token": "WAIT-TOKEN", "output": {"payload": {"status": "green", "build": 42}}}]
    record = store.get(RUN, keys.signal_entry_key("ci_finished", 0))
    assert record[keys.checkpoint_table().ttl_attribute] > record["signaled_at"]  # a signal nobody takes expires


def test_two_signals_before_the_wait_are_both_kept_in_order(aws, api, started):
    # Issue 24: the second replaced the first.
    assert api("signal", body={"build": 1})[1]["outcome"] == "buffered"
    assert api("signal", body={"build": 2})[1]["outcome"] == "buffered"
    store, sfn = CheckpointStore("checkpoints", aws["ddb"]), RecordingStepFunctions()
    for token in ("W1", "W2"):
        assert signals.register_waiter(store, sfn, RUN, "ci_finished", {}, token) == "consumed"
    assert [(s["token"], s["output"]["payload"]) for s in sfn.sent] == [("W1", {"build": 1}), ("W2", {"build": 2})]


def test_a_signal_after_the_wait_resumes_it(aws, api, sfn, started):
    store = CheckpointStore("checkpoints", aws["ddb"])
    assert signals.register_waiter(store, RecordingStepFunctions(), RUN, "ci_finished", {}, "WAIT-TOKEN") == "waiting"
    api.tokens.add("WAIT-TOKEN")
    status, body = api("signal")
    assert (status, body["outcome"]) == (200, "delivered")
    assert sfn.sent == [{"token": "WAIT-TOKEN", "output": {"payload": {"status": "green", "build": 42}}}]


MALFORMED_SIGNALS = [
    ({"run_id": "bad run!"}, "run_id"),
    ({"event": "e" * 129}, "event"),
    ({"event": "ci!"}, "event"),  # no wait_for can wait on it
    ({"body": ["not", "an", "object"]}, "payload"),
    ({"raw_body": "{oops"}, "body"),
    ({"body": {"blob": "x" * (300 * 1024)}}, "payload"),  # more than SendTaskSuccess takes
]


def test_a_malformed_signal_is_400_naming_the_field(aws, api, started):
    for change, field in MALFORMED_SIGNALS:
        status, body = api("signal", **change)
        assert (status, body["field"]) == (400, field), change
    assert [i for i in scan(aws["ddb"], "checkpoints") if i["sk"]["S"].startswith("signal#")] == []


def test_a_signal_nobody_could_take_is_refused_with_a_4xx_not_buffered(aws, api):
    status, body = api("signal")  # the run does not exist
    assert (status, body["error"], body["field"]) == (404, "signal_refused", "run_id") and "buffer=true" in body["hint"]
    assert api("signal", query={"buffer": "true"})[1]["outcome"] == "buffered"  # kept for a run that starts later
    handler("init_run")(load_event("init_run"))
    CheckpointStore("checkpoints", aws["ddb"]).put_once(RUN, keys.FINAL_RECORD, {"output": "done"})
    status, body = api("signal")
    assert (status, body["field"]) == (409, "run_id") and body["message"].endswith("has finished: nothing will wait for 'ci_finished' again")


def test_the_eventbridge_rule_target_delivers_signals(aws):
    import importlib

    from tests.functional.conftest import FakeContext

    signal_handler = importlib.import_module("longstep_functions.approval_api").signal_handler  # the module's second handler
    with pytest.raises(InvalidInputError, match=r"^detail\.run_id: no run 'func-run-1'$"):  # as the route refuses it
        signal_handler(load_event("signal_event"), FakeContext())
    handler("init_run")(load_event("init_run"))
    result = signal_handler(load_event("signal_event"), FakeContext())
    assert (result["run_id"], result["event"], result["status"]) == (RUN, "ci_finished", "buffered")
    record = CheckpointStore("checkpoints", aws["ddb"]).get(RUN, keys.signal_entry_key("ci_finished", 0))
    assert json.loads(record["payload"]) == {"status": "green", "build": 42}
    large = load_event("signal_event")
    large["detail"]["payload"] = {"blob": "x" * (300 * 1024)}
    with pytest.raises(InvalidInputError, match=r"^detail\.payload: is \d+ bytes of JSON"):
        signal_handler(large, FakeContext())
    bad = load_event("signal_event")
    bad["detail"]["run_id"] = "bad run!"
    with pytest.raises(InvalidInputError, match="detail.run_id"):
        signal_handler(bad, FakeContext())
    with pytest.raises(InvalidInputError, match="detail.event"):
        signal_handler({**bad, "detail": {"run_id": RUN, "payload": {}}}, FakeContext())
