"""The run commands against the local stack, as a user would type them: ``status`` follows a
run's latest execution and says when it stopped at ``max_turns``; ``resume`` refuses a finished
run unless ``--force``; ``signal`` refuses a run that does not exist unless ``--buffer``."""

from __future__ import annotations

import json

import pytest

from longstep_kit.cli import main
from longstep_kit.local.runner import RunOptions, run_scenario
from longstep_kit.ops import runs
from longstep_kit.testing.wait import wait_execution


@pytest.fixture(scope="module")
def finished(stack, triage):
    report = run_scenario(stack, triage, RunOptions(run_id="cli-done"))
    assert report["status"] == "SUCCEEDED"
    return report


@pytest.fixture(scope="module")
def capped(stack, triage):
    """A run stopped by max_turns after 2 turns: it succeeds without the agent finishing."""
    capped_scenario = triage.model_copy(update={"input": triage.input.model_copy(update={"max_turns": 2})})
    return run_scenario(stack, capped_scenario, RunOptions(run_id="cli-capped"))


def _cli(stack, capsys, *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--stack", stack.assembly.stack_name, "--region", "us-east-1"])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_status_follows_the_latest_execution(stack, finished, capsys):
    sfn = stack.client("stepfunctions")
    second = runs.resume(sfn, stack.state_machine_arn, "cli-done", force=True)
    wait_execution(sfn, second)
    code, out, _ = _cli(stack, capsys, "status", "cli-done", "--output", "json")
    shown = json.loads(out)
    assert code == 0
    assert shown["execution"] == "cli-done--g1" and (shown["status"], shown["execution_status"]) == ("succeeded", "SUCCEEDED")


def test_status_says_a_run_stopped_at_max_turns(stack, capped, capsys):
    code, out, _ = _cli(stack, capsys, "status", "cli-capped")
    assert code == 0
    assert "succeeded (max_turns: the agent did not finish)" in out


def test_resume_refuses_a_finished_run_without_force(stack, finished, capsys):
    code, _, err = _cli(stack, capsys, "resume", "cli-done")
    assert code == 2
    assert "already succeeded" in err and "--force" in err and err.count("\n") == 1


def test_signal_to_an_unknown_run_is_refused_unless_buffered(stack, capsys):
    code, _, err = _cli(stack, capsys, "signal", "nobody-here", "go")
    assert code == 2 and "no run 'nobody-here'" in err
    code, out, _ = _cli(stack, capsys, "signal", "nobody-here", "go", "--buffer")
    assert code == 0 and "buffered" in out


def test_status_of_an_unknown_run_is_one_line(stack, capsys):
    code, _, err = _cli(stack, capsys, "status", "never-started")
    assert code == 2 and "no execution named 'never-started'" in err
