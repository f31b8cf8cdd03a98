"""The ``longstep`` command as a user runs it."""

from __future__ import annotations

import json

from pathlib import Path

from longstep_kit import cli

SCENARIOS = Path(__file__).resolve().parents[2] / "events" / "scenarios"


def test_local_run_writes_the_report(tmp_path, capsys):
    report_path = tmp_path / "r.json"
    code = cli.main(["local", "run", str(SCENARIOS / "triage.json"), "--report", str(report_path), "--run-id", "cli-run"])
    out = capsys.readouterr().out
    assert code == 0
    report = json.loads(report_path.read_text())
    assert report["status"] == "SUCCEEDED" and report["run_id"] == "cli-run"
    assert report["effects"]["duplicate_effects"] == 0
    assert "turn 0   model            executed -> tools: search_docs" in out
    assert "SUCCEEDED: run cli-run in 9 turns" in out


def test_local_run_report_to_stdout(capsys):
    code = cli.main(["local", "run", str(SCENARIOS / "triage.json"), "--report", "-", "--run-id", "cli-stdout"])
    captured = capsys.readouterr()
    assert code == 0
    report = json.loads(captured.out)  # stdout is the report alone
    assert report["status"] == "SUCCEEDED" and report["run_id"] == "cli-stdout"
    assert "SUCCEEDED: run cli-stdout in 9 turns" in captured.err


def test_malformed_scenario_names_the_field(tmp_path, capsys):
    scenario = json.loads(open(str(SCENARIOS / "triage.json")).read())
    scenario["turns"]["2"]["tool_calls"][0]["input"] = "not an object"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(scenario))
    assert cli.main(["local", "run", str(path)]) == 2
    err = capsys.readouterr().err
    assert "turns.2.tool_calls.0.input" in err


def test_missing_scenario_file_is_a_clear_error(capsys):
    assert cli.main(["local", "run", str(SCENARIOS / "nope.json")]) == 2
    assert "no such scenario file" in capsys.readouterr().err
