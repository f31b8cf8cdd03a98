"""The triage scenario end to end on the local stack: the synthesized state machine on moto's
engine, the real handlers in-process, the world in moto's DynamoDB."""

from __future__ import annotations

import json

import pytest

from longstep_kit.local.report import build_report
from longstep_kit.local.runner import RunOptions, run_scenario
from longstep import keys
from longstep_kit.ops import runs as client
from longstep_kit.testing.wait import wait_execution
from longstep.store import decode_json, plain_item as _plain
from tests.local.conftest import sent_emails


@pytest.fixture(scope="module")
def clean(stack, triage):
    return run_scenario(stack, triage, RunOptions(run_id="triage-clean"))


def test_ends_succeeded_with_the_expected_answer(clean, triage):
    assert clean["status"] == "SUCCEEDED"
    for phrase in triage.expect.output_contains:
        assert phrase in clean["output"]


def test_every_step_ran_once_and_no_effect_twice(clean, triage):
    calls = sum(len(turn.tool_calls) for turn in triage.turns.values())
    assert clean["turns"] == len(triage.turns)
    assert clean["model_calls"] == {"executed": len(triage.turns), "replayed": 0}
    assert clean["tool_calls"] == {"executed": calls, "replayed": 0}
    assert clean["effects"] == {
        "by_tool": {"file_ticket": 2, "send_email": 2, "update_ticket": 2},  # from each tool's ledger
        "duplicate_effects": 0,
        "duplicates": {},
        "not_counted": [],
    }
    approvals = sum(1 for t in triage.turns.values() for c in t.tool_calls if c.name == "send_email")
    assert clean["lambda_invocations"] == 1 + len(triage.turns) + calls + approvals + 1


def test_report_counts_history_and_storage(clean):
    assert clean["history_events"] > clean["state_transitions"] > clean["lambda_invocations"]
    # the 330 KB incident report is offloaded to S3, compressed (it repeats itself)
    assert 0 < clean["storage"]["s3_bytes"] < 30_000
    assert 0 < clean["storage"]["dynamodb_bytes"] < 200_000
    assert len(clean["transcript_sha256"]) == 64


def test_the_edited_email_is_what_was_sent(stack, clean):
    subjects = sorted(subject for _, subject in sent_emails(stack, "triage-clean"))
    assert subjects == ["Action needed: retry storm in the order service", "Checkout outage: provider timeout"]


def test_resuming_a_finished_run_replays_everything(stack, triage, clean):
    first = len(stack.dispatcher.invocations)
    sfn = stack.client("stepfunctions")
    arn = client.resume(sfn, stack.state_machine_arn, "triage-clean", force=True)
    assert arn.endswith(":triage-clean--g1")  # every execution of a run is a generation
    wait_execution(sfn, arn)
    report = build_report(stack, "triage-clean", [arn], first, 0.0)
    assert report["status"] == "SUCCEEDED"
    assert report["transcript_sha256"] == clean["transcript_sha256"]
    assert report["model_calls"]["executed"] == 0 and report["tool_calls"]["executed"] == 0
    assert report["effects"] == clean["effects"]


def test_reject_mode_sends_nothing_and_tells_the_model(stack, triage):
    report = run_scenario(stack, triage, RunOptions(run_id="triage-rejected", approve="reject"))
    assert report["status"] == "SUCCEEDED"
    assert report["effects"]["by_tool"]["send_email"] == 0
    rows = stack.client("dynamodb").query(
        TableName=stack.outputs["CheckpointTableName"],
        KeyConditionExpression="pk = :r AND sk = :s",
        ExpressionAttributeValues={":r": {"S": "triage-rejected"}, ":s": {"S": keys.tool_step_key(5, 0)}},
    )["Items"]
    assert decode_json("result", _plain(rows[0]))["status"] == "error"


@pytest.mark.parametrize(
    ("change", "error", "named"),
    [
        ({"goal": None}, "InvalidInputError", "goal"),
        ({"agent": "nobody"}, "UnknownAgentError", "agent"),
        ({"max_turns": -1}, "InvalidInputError", "max_turns"),
    ],
)
def test_bad_start_input_fails_the_execution_naming_the_field(stack, change, error, named):
    sfn = stack.client("stepfunctions")
    payload = {"run_id": f"bad-{error}-{named}", "goal": "g", "agent": "triage", **change}
    payload = {k: v for k, v in payload.items() if v is not None}
    arn = sfn.start_execution(stateMachineArn=stack.state_machine_arn, name=payload["run_id"], input=json.dumps(payload))["executionArn"]
    desc = wait_execution(sfn, arn)
    assert desc["status"] == "FAILED"
    assert desc["error"] == error
    assert named in json.loads(desc["cause"])["errorMessage"]
    items = stack.client("dynamodb").query(
        TableName=stack.outputs["CheckpointTableName"],
        KeyConditionExpression="pk = :r",
        ExpressionAttributeValues={":r": {"S": payload["run_id"]}},
    )["Items"]
    assert items == []


def test_listing_the_stack_prints_nothing_of_the_types_moto_skips(stack):
    """moto's CloudFormation parses (and warns about) its skipped types on every listing; the
    local stack reports them once (``skipped_resources``), so a run's output stays readable."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        resources = stack.stack_resources()
    assert any(r["ResourceType"] == "AWS::DynamoDB::Table" for r in resources)
    assert not [w for w in caught if "not supported by moto" in str(w.message)]
    assert "AWS::S3::BucketPolicy" in stack.skipped_resources
