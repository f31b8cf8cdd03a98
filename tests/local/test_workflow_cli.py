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


def test_faults_that_the_run_never_reaches_are_refused_after_a_probe_run(capsys):
    assert cli.main(["local", "run", str(SCENARIO), "--quiet", "--restart-at", "4"]) == 2  # position 4 is the approval
    assert "--restart-at: no step starts at position 4" in capsys.readouterr().err
    assert cli.main(["local", "run", str(SCENARIO), "--quiet", "--faults", "random:40"]) == 2
    assert "--faults 'random:40': only 19 distinct faults exist in this scenario's run" in capsys.readouterr().err


def test_random_faults_and_a_restart_end_with_the_clean_log(tmp_path, capsys):
    clean_path, faulty_path = tmp_path / "clean.json", tmp_path / "faulty.json"
    assert cli.main(["local", "run", str(SCENARIO), "--report", str(clean_path), "--quiet"]) == 0
    code = cli.main(
        ["local", "run", str(SCENARIO), "--report", str(faulty_path), "--quiet", "--faults", "random:6", "--seed", "7", "--restart-at", "5"]
    )
    assert code == 0, capsys.readouterr().out
    clean, faulty = json.loads(clean_path.read_text()), json.loads(faulty_path.read_text())
    assert len(faulty["faults_injected"]) == 7 and faulty["restarts"] == 1
    assert faulty["log_sha256"] == clean["log_sha256"] and faulty["duplicate_effects"] == 0
    assert [c["transcript_sha256"] for c in faulty["children"]] == [c["transcript_sha256"] for c in clean["children"]]
