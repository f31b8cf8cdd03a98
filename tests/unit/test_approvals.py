"""The approver's Decision model; the approvals table's layout, settings, views and notifications."""

import json

import pytest
from pydantic import ValidationError

from longstep import keys
from longstep import settings as env
from longstep.errors import BadRequestError, InvalidInputError
from longstep.humans.decisions import Decision
from longstep.humans.notifications import notification
from longstep.humans.requests import view
from longstep.humans.service import parse_decision
from longstep.humans.table import new_approval_id
from longstep.inputs import parse_model
from longstep.settings import Settings, SettingsError


def test_approve_needs_nothing_else():
    d = Decision(decision="approve")
    assert d.reason is None and d.input is None
    assert d.approver == "unknown"
    assert d.model_dump(exclude_none=True) == {"decision": "approve", "approver": "unknown"}


@pytest.mark.parametrize("reason", [None, ""])
def test_reject_requires_a_reason(reason):
    with pytest.raises(ValidationError, match="reason is required"):
        Decision(decision="reject", reason=reason)


def test_reject_with_reason_is_valid():
    d = Decision(decision="reject", reason="wrong recipient", approver="alice")
    assert (d.reason, d.approver) == ("wrong recipient", "alice")


def test_edit_requires_input():
    with pytest.raises(ValidationError, match="input is required"):
        Decision(decision="edit", reason="fixing the address")


def test_edit_with_input_is_valid():
    d = Decision(decision="edit", input={"to": "bob@example.com"})
    assert d.input == {"to": "bob@example.com"}


def test_unknown_decision_is_rejected():
    with pytest.raises(ValidationError) as info:
        Decision(decision="maybe")
    assert info.value.errors()[0]["loc"] == ("decision",)


def test_extra_fields_are_forbidden():
    with pytest.raises(ValidationError, match="Extra inputs"):
        Decision(decision="approve", comment="lgtm")


def test_parse_model_turns_decision_problems_into_invalid_input():
    with pytest.raises(InvalidInputError, match="reason is required to reject"):
        parse_model(Decision, {"decision": "reject"}, "decision")
    with pytest.raises(InvalidInputError, match="input"):
        parse_model(Decision, {"decision": "edit", "input": "not an object"}, "decision")


# -- the approvals table's layout, settings, views and notifications -----------------------------

ITEM = {
    "approval_id": "abc",
    "run_id": "r1",
    "turn": 3,
    "call": 1,
    "tool": "send_email",
    "input": json.dumps({"to": "a@example.com"}),
    "status": "pending",
    "requested_at": 1_700_000_000.5,
    "expires_at": 1_700_086_400.5,
    "task_token": "SECRET-TOKEN-123456",
    "agent": "triage",
    "purge_at": 1_800_000_000,
    "run_call": "r1#000003#001",
}


def test_approvals_table_lists_by_status_a_runs_calls_together_without_the_token():
    schema = keys.approvals_table()
    assert (schema.partition_key, schema.sort_key, schema.ttl_attribute) == ("approval_id", None, "purge_at")
    (index,) = schema.indexes
    assert (index.name, index.partition_key, index.sort_key) == (keys.APPROVALS_BY_STATUS_INDEX, "status", "run_call")
    assert "task_token" not in index.projected
    assert {d["AttributeName"] for d in schema.attribute_definitions()} == {"approval_id", "status", "run_call"}
    args = schema.create_table_arguments()
    assert args["GlobalSecondaryIndexes"][0]["Projection"]["ProjectionType"] == "INCLUDE"
    ordered = [keys.approval_run_call("r1", t, c) for t, c in ((0, 0), (0, 1), (2, 0), (10, 0))]
    assert sorted(ordered) == ordered and all(k.startswith("r1#") for k in ordered)


def test_approval_ids_are_unguessable_and_never_look_like_options():
    ids = {new_approval_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(len(i) == 24 and i[0].isalnum() for i in ids)


def test_settings_are_read_from_the_shared_variable_names():
    read = Settings.from_env(
        {env.ENV_APPROVALS_TABLE: "t", env.ENV_APPROVAL_TOPIC_ARN: "arn:topic", env.ENV_APPROVAL_TIMEOUT_SECONDS: "60", env.ENV_RETENTION_DAYS: "3"},
        required=(env.ENV_APPROVALS_TABLE,),
    )
    approvals = read.approvals
    assert (approvals.table, approvals.topic_arn, approvals.timeout_seconds, read.retention_days, approvals.api_url) == (
        "t",
        "arn:topic",
        60,
        3,
        None,
    )
    defaults = Settings.from_env({env.ENV_APPROVALS_TABLE: "t"}, required=()).approvals
    assert (defaults.topic_arn, defaults.timeout_seconds) == (None, env.DEFAULT_APPROVAL_TIMEOUT_SECONDS)
    with pytest.raises(SettingsError, match=env.ENV_APPROVALS_TABLE):
        Settings.from_env({}, required=(env.ENV_APPROVALS_TABLE,))
    # A function without the table (no approvals) reads fine, and fails only when it asks for it.
    with pytest.raises(SettingsError, match=env.ENV_APPROVALS_TABLE):
        Settings.from_env({}, required=()).approvals.table_name()


def test_a_view_shows_the_public_attributes_only():
    shown = view(ITEM)
    assert set(shown) == {
        "approval_id",
        "run_id",
        "turn",
        "call",
        "tool",
        "input",
        "input_digest",
        "status",
        "requested_at",
        "expires_at",
        "decision",
        "approver",
        "decided_at",
    }
    assert shown["input"] == {"to": "a@example.com"} and shown["requested_at"] == "2023-11-14T22:13:20Z"
    assert "SECRET-TOKEN" not in json.dumps(shown)
    assert view(ITEM, now=ITEM["expires_at"] + 1)["status"] == "expired"
    assert view(ITEM, now=ITEM["expires_at"] - 1)["status"] == "pending"


def test_the_notification_says_how_to_decide_and_never_carries_the_token():
    message = notification(view(ITEM), api_url="https://api.example.com/v1/")
    assert message["Subject"] == "Approval needed: send_email in run r1"
    text = json.loads(message["Message"])
    assert "longstep approve abc" in text["email"] and "POST https://api.example.com/v1/approvals/abc/decision" in text["email"]
    assert json.loads(text["default"])["approval_id"] == "abc"
    assert "SECRET-TOKEN" not in json.dumps(message)
    assert message["MessageAttributes"]["run_id"]["StringValue"] == "r1"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("approve", "body"),
        ({"decision": "veto"}, "decision"),
        ({"decision": "reject"}, "reason"),
        ({"decision": "edit"}, "input"),
        ({"decision": "approve", "input": {}}, "input"),
        ({"decision": "approve", "approver": "me"}, "approver"),
    ],
)
def test_a_malformed_decision_body_names_the_field(body, field):
    with pytest.raises(BadRequestError) as info:
        parse_decision(body, "arn:aws:iam::1:user/alice")
    assert info.value.field == field and str(info.value).startswith(f"{field}: ")


def test_the_approver_comes_from_the_request_not_the_body():
    decided, seen = parse_decision({"decision": "edit", "input": {"to": "b@example.com"}, "reason": "fix"}, "arn:aws:iam::1:user/alice")
    assert (decided.decision, decided.input, decided.approver) == ("edit", {"to": "b@example.com"}, "arn:aws:iam::1:user/alice")
    assert seen is None  # no digest given: the decision is bound to the request's arguments as they are
