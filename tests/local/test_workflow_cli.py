"""``longstep local run`` of a workflow scenario (its own module: the CLI deploys a stack of its own)."""

from __future__ import annotations

import json
from pathlib import Path

from longstep_kit import cli

SCENARIO = Path(__file__).resolve().parents[2] / "events" / "scenarios" / "release.json"


def test_longstep_local_run_runs_a_workflow_scenario(tmp_path, capsys):
    report_path = tmp_path / "release.json"
    code = cli.main(["local", "run", str(SCENARIO), "--report", str(report_path), "--quiet"])
    out = capsys.readouterr().out
    assert code == 0, out
    report = json.loads(report_path.read_text())
    assert report["status"] == "SUCCEEDED" and report["waits"][0]["lambda_invocations_during"] == 0
    assert "SUCCEEDED: workflow release run release-billing-2-4-0" in out


def test_agent_only_flags_are_refused_for_a_workflow_scenario(capsys):
    assert cli.main(["local", "run", str(SCENARIO), "--restart-at", "2"]) == 2
    assert "--restart-at: not supported for workflow scenarios" in capsys.readouterr().err
