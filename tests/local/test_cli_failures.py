"""A failed run, as the terminal shows it: a local run prints under 2 KB with the cause in it, the
engine's own messages go to a log file whose path it prints, and ``status`` prints one line per
failed state (the state, the error, where to look), no Lambda stack trace or file path."""

from __future__ import annotations

import re

from longstep_kit.cli import main
from longstep_kit.cli.failure_lines import cause_summary, failure_lines

FAILING = ["local", "run", "events/scenarios/triage.json", "--approve", "reject", "--fault", "permanent@2", "--run-id", "failing-1"]


def test_a_failed_local_run_prints_under_2_kb_with_its_cause_and_the_engine_log(capfd):
    assert main(FAILING) == 1
    out, err = capfd.readouterr()
    printed = out + err
    assert len(printed.encode()) < 2048, printed
    assert "error: EscalationAborted: the local run's answerer (local-auto, not a person) aborted the run" in out
    assert "failed: state ModelTurn: ModelAccessError: injected permanent error in turn 2" in out
    assert "a human aborted" not in printed  # nobody did: the local answerer did
    assert "Exception=FailureEventException" not in printed and "Traceback" not in printed  # moto's internals
    # Progress while the stack starts: each phase and its time.
    assert re.search(r"^  deployed \d+ resources into moto \(\d+\.\d s\)$", out, re.M), out
    log = re.search(r"the engine's log: (\S+\.log)", out)
    assert log, out
    from pathlib import Path

    assert "FailureEventException" in Path(log.group(1)).read_text()  # ...are in the log file


def test_status_of_a_failed_run_is_a_line_per_failure_without_a_trace(stack, capsys):
    from longstep_kit.local.runner import RunOptions, run_scenario
    from longstep_kit.local.scenario import load_scenario

    report = run_scenario(
        stack, load_scenario("events/scenarios/triage.json"), RunOptions(run_id="failing-2", approve="reject", faults=[_permanent(2)])
    )
    assert report["status"] == "FAILED"
    capsys.readouterr()
    assert main(["status", "failing-2", "--state-machine-arn", stack.state_machine_arn]) == 1
    out = capsys.readouterr().out
    lines = out.strip().splitlines()
    assert lines[0].startswith("run failing-2: failed (execution failing-2 FAILED")
    assert "  failed: state ModelTurn: ModelAccessError: injected permanent error in turn 2" in lines
    assert lines[-1].startswith("  look: longstep show failing-2")
    assert "stackTrace" not in out and "/work/" not in out and 'File "' not in out


def _permanent(turn: int):
    from longstep_kit.local.faults import parse_fault

    return parse_fault(f"permanent@{turn}")


def test_a_lambda_errors_cause_is_its_first_line_without_paths():
    cause = '{"errorMessage": "boom in /home/me/project/agents/tools.py\\nsecond line", "errorType": "ValueError", "stackTrace": ["  File \\"/x/y.py\\""]}'
    assert cause_summary(cause) == "boom in .../tools.py"
    assert cause_summary("plain\ntext") == "plain"
    assert cause_summary("x" * 500).endswith("...") and len(cause_summary("x" * 500)) == 200
    events = [
        {"type": "TaskStateEntered", "stateEnteredEventDetails": {"name": "CallTool"}},
        {"type": "TaskFailed", "taskFailedEventDetails": {"error": "ToolFailedError", "cause": cause}},
        {"type": "ExecutionFailed", "executionFailedEventDetails": {"error": "States.TaskFailed", "cause": "x"}},
    ]
    assert failure_lines(events, "r1") == [
        "  failed: state CallTool: ToolFailedError: boom in .../tools.py",
        "  failed: state CallTool: States.TaskFailed: x",
        "  look: longstep show r1",
    ]
    assert failure_lines([], "r1") == []


def test_setup_prints_a_line_per_phase_with_its_time():
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    # -W: as if the layer's requirements changed, so that its phase runs (its wheels are cached: quick).
    done = subprocess.run(
        ["make", "-s", "-W", "layers/runtime/requirements.txt", ".longstep/.layer"], cwd=root, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert re.search(r"^setup: building the Lambda layer .*\.\.\.$", done.stdout, re.M), done.stdout
    assert re.search(r"^setup: building the Lambda layer .*: done in \d+ s$", done.stdout, re.M), done.stdout


def test_a_synth_says_what_it_is_doing_first(tmp_path):
    """``cdk synth`` runs app.py and shows its stderr: the first line comes before the half minute of building."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "CDK_CONTEXT_JSON": json.dumps({"longstep": {"max_turns": 0}}), "CDK_OUTDIR": str(tmp_path / "cdk.out")}
    done = subprocess.run([sys.executable, "app.py"], cwd=root, env=env, capture_output=True, text=True, timeout=120)
    lines = done.stderr.splitlines()
    assert lines[0] == "longstep: building the app's stack (agents, functions, the state machine)...", done.stderr
    assert done.returncode == 2 and lines[-1].startswith("error: ") and "longstep.max_turns" in lines[-1]


def test_an_at_most_once_tool_without_a_probe_is_warned_about_before_the_run():
    from longstep_kit.agent_warnings import unprobed_warnings
    from tests.fixtures.unprobed_agent import build

    assert unprobed_warnings(build()) == [
        "warning: agent 'payer': tool 'charge' is at_most_once with no probe: a crash right after its effect "
        "escalates the run to a human (give it probe=...: docs/durability.md)"
    ]
    from agents.triage import build as triage

    assert unprobed_warnings(triage()) == []  # send_email has its probe


def test_a_local_run_warns_of_an_unprobed_tool_before_deploying(tmp_path, capsys, monkeypatch):
    import json
    import pytest

    scenario = {"name": "pay", "input": {"goal": "pay", "agent": "payer"}, "turns": {"0": {"text": "Summary: nothing to pay."}}}
    (tmp_path / "pay.json").write_text(json.dumps(scenario))
    monkeypatch.setattr("longstep_kit.local.stack.LocalStack.start", lambda self: pytest.fail("deployed"))
    with pytest.raises(BaseException):  # stopped at the deploy: the warning came before it
        main(["local", "run", str(tmp_path / "pay.json"), "--agent", "payer=tests.fixtures.unprobed_agent:build", "--debug"])
    assert "warning: agent 'payer': tool 'charge' is at_most_once with no probe" in capsys.readouterr().err
