"""Deploying under running agents, on the local stack: every shipped scenario's export replays on
the current code (the CI gate), an incompatible agent change fails the gate and a compatible one
passes, and ``show`` displays the code version a run started on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from longstep_kit import cli
from longstep_kit.local.runner import RunOptions, run_scenario
from longstep_kit.local.scenario import load_scenario
from longstep_kit.local.workflow_run import is_workflow_scenario

REPO_ROOT = Path(__file__).resolve().parents[2]
# The agents the project's cdk.json registers (the stack's agents).
PROJECT_AGENTS = set(json.loads((REPO_ROOT / "cdk.json").read_text())["context"]["longstep"]["agents"])

# The agents' scenarios: a workflow's run is checked against new code by
# longstep.workflows.testing.replay_recorded (docs/workflows.md), not by the agent replay gate.
SCENARIOS = sorted(
    path
    for path in (REPO_ROOT / "events" / "scenarios").glob("*.json")
    # (a scenario that registers agents of its own runs on a stack of its own: test_subagents.py;
    # one whose agent the project does not register, mcp.json's depot with its MCP server, too:
    # test_mcp_agent.py)
    if not is_workflow_scenario(str(path)) and not load_scenario(path).agents and load_scenario(path).input.agent in PROJECT_AGENTS
)


@pytest.fixture(scope="module")
def exports(stack, tmp_path_factory) -> dict[str, Path]:
    """Each shipped scenario run once and exported with ``longstep export``."""
    out = tmp_path_factory.mktemp("exports")
    files = {}
    for path in SCENARIOS:
        report = run_scenario(stack, load_scenario(path), RunOptions(run_id=f"gate-{path.stem}"))
        assert report["status"] == "SUCCEEDED", report
        files[path.stem] = out / f"{path.stem}.json"
        assert cli.main(["export", f"gate-{path.stem}", "--out", str(files[path.stem])]) == 0
    return files


def _project(tmp_path: Path, reference: str) -> Path:
    """A project whose cdk.json registers ``triage`` as ``reference`` (the code about to be deployed)."""
    (tmp_path / "cdk.json").write_text(json.dumps({"app": "python3 app.py", "context": {"longstep": {"agents": {"triage": reference}}}}))
    (tmp_path / "app.py").write_text("")
    return tmp_path


def test_every_shipped_scenario_export_replays_on_the_current_code(exports, capsys):
    capsys.readouterr()
    assert cli.main(["replay", *map(str, exports.values())]) == 0
    out = capsys.readouterr().out
    assert out.count("\nok ") + out.startswith("ok ") == len(SCENARIOS), out
    assert "DIVERGED" not in out


def test_an_export_recorded_before_an_incompatible_change_fails_the_gate(exports, tmp_path, capsys):
    project = _project(tmp_path, "tests.fixtures.agents.triage_variants:renamed")
    capsys.readouterr()
    assert cli.main(["replay", "--project", str(project), str(exports["triage"])]) == 1
    out = capsys.readouterr().out
    assert "DIVERGED" in out and "tool 'file_ticket' no longer exists" in out


def test_a_compatible_change_passes_the_gate(exports, tmp_path, capsys):
    project = _project(tmp_path, "tests.fixtures.agents.triage_variants:extended")
    assert cli.main(["replay", "--project", str(project), "--output", "json", str(exports["triage"])]) == 0
    (report,) = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["turns"] == 9 and report["divergences"] == []


def test_an_unreadable_export_is_a_usage_error(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert cli.main(["replay", str(bad)]) == 2
    assert "not valid JSON" in capsys.readouterr().err


def test_show_displays_the_code_version_the_run_started_on(exports, capsys):
    from agents.triage import build
    from longstep.code_version import code_parts, code_version

    capsys.readouterr()
    assert cli.main(["show", "gate-triage"]) == 0
    out = capsys.readouterr().out
    assert f"code version {code_version(code_parts(build()))}" in out
    exported = json.loads(exports["triage"].read_text())
    assert exported["recorded"]["code_version"] == code_version(code_parts(build()))
