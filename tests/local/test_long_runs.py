"""Long runs: continue-as-new hands a run to fresh executions without losing anything, and an
exported run replays locally to the same transcript."""

from __future__ import annotations

import json

import pytest

from longstep_kit import cli
from longstep_kit.local.runner import RunOptions, run_scenario
from longstep_kit.local.scenario import Scenario, load_scenario


@pytest.fixture(scope="module")
def clean(stack, triage):
    stack.reset_data()
    return run_scenario(stack, triage, RunOptions(run_id="triage", execution_name="long-clean"))


def test_continue_as_new_keeps_the_transcript(stack, triage, clean):
    stack.reset_data()
    chunked = Scenario.model_validate({**triage.model_dump(), "input": {**triage.input.model_dump(), "turns_per_execution": 3}})
    report = run_scenario(stack, chunked, RunOptions(run_id="triage", execution_name="long-chunked"))
    assert report["status"] == "SUCCEEDED"
    assert report["executions"] == 3  # turns 0-2, 3-5, 6-8: two hand-overs
    assert report["transcript_sha256"] == clean["transcript_sha256"]
    assert report["effects"] == clean["effects"]
    assert report["model_calls"]["executed"] == clean["model_calls"]["executed"]  # nothing redone across generations
    sfn = stack.client("stepfunctions")
    names = {e["name"] for e in sfn.list_executions(stateMachineArn=stack.state_machine_arn)["executions"]}
    assert {"long-chunked", "long-chunked--g1", "long-chunked--g2"} <= names


def test_an_exported_run_replays_to_the_same_transcript(stack, triage, clean, tmp_path, capsys):
    out = tmp_path / "export.json"
    stack.reset_data()
    first = run_scenario(stack, triage, RunOptions(run_id="triage", execution_name="long-export"))
    assert cli.main(["export", "triage", "--out", str(out)]) == 0
    assert "9 turns" in capsys.readouterr().out
    exported = json.loads(out.read_text())
    assert exported["recorded"]["transcript_sha256"] == first["transcript_sha256"]
    assert len(exported["recorded"]["artifacts"]) == 1  # the offloaded 330 KB incident report
    (content,) = exported["recorded"]["artifacts"].values()
    assert len(content) > 300_000, content[:300]
    replay = load_scenario(out)
    replay = Scenario.model_validate({**replay.model_dump(), "world": triage.world, "approvals": triage.approvals})
    stack.reset_data()
    again = run_scenario(stack, replay, RunOptions(run_id="triage", execution_name="long-replay"))
    assert again["status"] == "SUCCEEDED"
    assert again["transcript_sha256"] == first["transcript_sha256"]
