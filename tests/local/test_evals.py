"""``longstep eval`` on the local stack: the triage run evaluated under the same scripted model
finds no divergence, and under a model that files one ticket with another priority finds exactly
that call and the effect it would have caused; neither eval writes to the world (the agent's
tables, item for item, and every bucket but the runtime's artifacts) nor to the recorded run."""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from longstep import clients
from longstep_kit import cli
from longstep_kit.cli.eval_cmd import crashes, world_items
from longstep_kit.local import iam
from longstep_kit.local.faults import random_faults
from longstep_kit.local.resources import agent_tables
from longstep_kit.local.runner import RunOptions, run_scenario
from longstep_kit.testing.wait import wait_execution

from tests.local.conftest import REPO_ROOT, SCENARIOS

CHANGE = REPO_ROOT / "events" / "evals" / "triage_p3.json"


def _eval(*argv: str) -> tuple[int, dict[str, Any] | None, str]:
    """``longstep eval ... --output json``: its exit code, its report (its reports: several runs) and its stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["eval", *argv, "--output", "json"])
    data = json.loads(out.getvalue()) if out.getvalue() else None
    return code, data[0] if isinstance(data, list) and len(data) == 1 else data, err.getvalue()


def _world(stack: Any) -> dict[str, Any]:
    """The world's state: the agent's tables, item for item, and the objects of every bucket but
    the runtime's artifacts (where the eval's record and script go)."""
    s3 = stack.client("s3")
    buckets = [b["Name"] for b in s3.list_buckets()["Buckets"] if b["Name"] != stack.outputs["ArtifactBucketName"]]
    objects = {b: sorted(o["Key"] for o in s3.list_objects_v2(Bucket=b).get("Contents", [])) for b in buckets}
    return {"tables": world_items(stack, "triage"), "objects": objects}


def _partition(stack: Any, run_id: str) -> list[dict[str, Any]]:
    ddb = stack.client("dynamodb")
    query = {
        "TableName": stack.outputs["CheckpointTableName"],
        "KeyConditionExpression": "pk = :p",
        "ExpressionAttributeValues": {":p": {"S": run_id}},
    }
    return ddb.query(**query)["Items"]


@pytest.fixture(scope="module")
def evals(stack, triage):
    """The triage run, then two evals of it: under the same script, and under triage_p3.json (gated)."""
    assert run_scenario(stack, triage, RunOptions(run_id="eval-src"))["status"] == "SUCCEEDED"
    before, recorded = _world(stack), _partition(stack, "eval-src")
    first = len(stack.dispatcher.invocations)
    same = _eval("eval-src", "--change", str(SCENARIOS / "triage.json"), "--run-id", "eval-same", "--gate")
    changed = _eval("eval-src", "--change", str(CHANGE), "--run-id", "eval-p3", "--gate")
    # The functions that answered the evals' tool calls (CallTool's and CallOneTool's: their items name a call).
    answering = {i.handler for i in stack.dispatcher.invocations[first:] if isinstance(i.event, dict) and "call" in i.event and "tool" in i.event}
    return {
        "answering": answering,
        "same": same,
        "changed": changed,
        "before": before,
        "after": _world(stack),
        "recorded": recorded,
        "recorded_after": _partition(stack, "eval-src"),
    }


def test_the_same_model_does_not_diverge_and_passes_the_gate(evals):
    code, report, _ = evals["same"]
    assert code == 0 and report["status"] == "SUCCEEDED" and report["gate_passed"]
    assert report["first_divergence"] is None
    assert (report["added"], report["removed"], report["changed"], report["effects_added"], report["effects_removed"]) == ([], [], [], [], [])
    assert report["answered"] == {"recorded": 10, "live": 0, "withheld": 0, "rejected": 0}  # every call of triage's 10, from the record
    assert report["output"] == report["recorded_output"]
    assert report["tokens"] == report["recorded_tokens"] and report["tokens"]["input"] > 0  # the same replies, the same usage


def test_a_changed_call_is_the_one_divergence_and_its_effect_fails_the_gate(evals):
    code, report, _ = evals["changed"]
    assert code == 1 and report["status"] == "SUCCEEDED" and not report["gate_passed"]
    assert report["first_divergence"] == 6
    (changed,) = report["changed"]
    assert (changed["turn"], changed["call"], changed["tool"], changed["args"]["priority"], changed["recorded_args"]["priority"]) == (
        6,
        0,
        "file_ticket",
        "P3",
        "P2",
    )
    assert report["added"] == [] and report["removed"] == []
    assert [(e["tool"], e["effect"], e["args"]["priority"]) for e in report["effects_added"]] == [("file_ticket", "keyed", "P3")]
    assert [(e["tool"], e["args"]["priority"]) for e in report["effects_removed"]] == [("file_ticket", "P2")]
    assert [(w["turn"], w["tool"]) for w in report["withheld"]] == [(6, "file_ticket")]
    assert report["answered"] == {"recorded": 9, "live": 0, "withheld": 1, "rejected": 0}


def test_no_eval_writes_to_the_world_or_the_record(evals):
    tables = evals["before"]["tables"]
    assert tables and sum(map(len, tables.values())) > 0  # the world counted is the agent's, seeded and written by the record
    assert evals["after"] == evals["before"]  # every table item for item, every bucket's objects
    assert evals["recorded_after"] == evals["recorded"]


def test_bad_input_is_one_line_and_exit_2(evals, tmp_path):
    bad = json.loads(CHANGE.read_text())
    bad["turns"]["6"]["tool_calls"][0]["name"] = "file_tiket"
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    scenario = _eval("eval-src", "--change", str(tmp_path / "bad.json"))
    unknown = _eval("no-such-run", "--change", str(CHANGE))
    late = _eval("eval-src", "--change", str(CHANGE), "--at-turn", "42")
    taken = _eval("eval-src", "--change", str(CHANGE), "--run-id", "eval-p3")
    spaced = _eval("eval-src", "--change", str(CHANGE), "--run-id", "eval p3")
    cases = (
        (scenario, "turns.6.tool_calls.0.name"),
        (unknown, "run_id"),
        (late, "at_turn"),
        (taken, "run_id: a run named 'eval-p3' exists"),
        (spaced, "run_id: 'eval p3' must be"),
    )
    for (code, report, err), words in cases:
        assert (code, report) == (2, None) and err.count("\n") == 1 and words in err, err


def test_the_eval_variants_role_may_read_the_world_and_is_refused_a_write(stack, evals):
    # BindEval-triage sent every call of both evals to CallToolEval-triage (docs/evals.md).
    assert evals["answering"] == {"longstep_functions.call_tool_eval.lambda_handler"}
    (fn,) = [f for f in stack.client("lambda").list_functions()["Functions"] if f["Handler"] == "longstep_functions.call_tool_eval.lambda_handler"]
    tickets = agent_tables(stack, "triage")["tickets"]
    with iam.acting_as(fn["Role"]):
        ddb = clients.client("dynamodb")
        ddb.get_item(TableName=tickets, Key={"ticket_id": {"S": "BUG-101"}})  # a read goes through
        with pytest.raises(ClientError) as refused:  # what file_ticket would do, were it ever called
            ddb.put_item(TableName=tickets, Item={"ticket_id": {"S": "TCK-EVAL"}, "title": {"S": "x"}})
    assert refused.value.response["Error"]["Code"] == "AccessDeniedException"
    assert "TCK-EVAL" not in json.dumps(world_items(stack, "triage"))


def test_evals_crashed_at_random_step_boundaries_report_the_same_and_write_nothing(stack, evals):
    # Each eval run is planned 4 crashes at random step boundaries and recovers as any run does (its steps replay their records).
    fired = []
    for seed, change, twin in ((1, SCENARIOS / "triage.json", "same"), (2, CHANGE, "changed")):
        with crashes(stack, random_faults("random:4", seed, 9)) as injected:
            code, report, err = _eval("eval-src", "--change", str(change), "--run-id", f"eval-{twin}-crashed")
        assert code == 0 and report["status"] == "SUCCEEDED", err
        same = ("first_divergence", "added", "removed", "changed", "effects_added", "effects_removed", "answered")
        assert {k: report[k] for k in same} == {k: evals[twin][1][k] for k in same}, twin
        fired += injected
    assert len(fired) >= 2  # crashes did fire (which ones depends on the seed)
    assert _world(stack) == evals["before"]


def test_an_export_file_is_evaluated_as_the_run_it_records(evals, tmp_path):
    exported = tmp_path / "eval-src.json"
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli.main(["export", "eval-src", "--out", str(exported)]) == 0
    code, report, err = _eval(str(exported), "--change", str(CHANGE), "--run-id", "eval-file")
    assert code == 0 and report["run_id"] == "eval-src" and report["recorded_status"] is None, err  # a file says nothing of how the run ended
    expected = evals["changed"][1]
    assert (report["first_divergence"], report["changed"], report["effects_added"]) == (6, expected["changed"], expected["effects_added"])


def test_an_eval_run_that_escalates_is_stopped_and_said_in_one_line(stack, evals, tmp_path):
    # Three turns of calls to a tool that does not exist spend the model's correction budget: turn 4 escalates.
    mistaken = json.loads(CHANGE.read_text())
    for turn in ("1", "2", "3"):
        mistaken["turns"][turn] = {"text": "Trying a tool.", "tool_calls": [{"name": "no_such_tool", "input": {}}]}
    mistaken["invalid_calls"] = ["1:0", "2:0", "3:0"]
    (tmp_path / "mistaken.json").write_text(json.dumps(mistaken))
    stack.clock.hold()  # as on AWS, time waits for the escalation's answer (the virtual clock would time it out at once)
    try:
        code, report, err = _eval("eval-src", "--change", str(tmp_path / "mistaken.json"), "--run-id", "eval-escalates")
    finally:
        stack.clock.release()
    assert (code, report) == (1, None) and err.count("\n") == 1, err
    assert "eval run eval-escalates escalated at turn 4" in err and "CorrectionBudgetError" in err and "stopped" in err
    execution = stack.state_machine_arn.replace(":stateMachine:", ":execution:") + ":eval-escalates"
    assert wait_execution(stack.client("stepfunctions"), execution, timeout=60)["status"] == "ABORTED"


def test_several_runs_are_evaluated_in_turn_and_the_gate_fails_on_any(stack, triage, evals):
    assert run_scenario(stack, triage, RunOptions(run_id="eval-src2"))["status"] == "SUCCEEDED"
    code, reports, err = _eval("eval-src", "eval-src2", "--change", str(CHANGE), "--gate")
    assert code == 1, err
    assert [(r["run_id"], r["eval_run_id"], r["first_divergence"], r["gate_passed"]) for r in reports] == [
        ("eval-src", "eval-src-eval0", 6, False),
        ("eval-src2", "eval-src2-eval0", 6, False),
    ]
    code, reports, err = _eval("eval-src", "eval-src2", "--change", str(CHANGE), "--run-id", "one")
    assert (code, reports) == (2, None) and "--run-id" in err


def test_a_fork_point_replays_the_records_replies_before_it_and_compares_from_it(evals):
    code, report, err = _eval("eval-src", "--change", str(CHANGE), "--at-turn", "4", "--run-id", "eval-at4")
    assert code == 0 and report["at_turn"] == 4 and report["status"] == "SUCCEEDED", err
    assert (report["first_divergence"], [c["turn"] for c in report["changed"]]) == (6, [6])
    assert report["answered"] == {"recorded": 3, "live": 0, "withheld": 1, "rejected": 0}  # the calls of turns 4-7 only
