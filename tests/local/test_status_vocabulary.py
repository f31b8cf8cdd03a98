"""One status vocabulary (``longstep.run_status``) on every surface: a stopped run and a paused run
on the local stack, told the same by the runs index, ``runs`` (``--status``, ``--where``), ``show``,
``status``, ``watch``, the run UI's backend and the exit codes (a script gating on ``status`` never
takes a stopped run for a success)."""

from __future__ import annotations

import json
import re

import pytest

from longstep import keys, run_status
from longstep.store import CheckpointStore
from longstep_kit.cli import main
from longstep_kit.ops.views.inspector import RunInspector
from longstep_kit.testing import RunOptions, run_scenario, wait_until
from longstep_kit.ui.backend import Backend
from tests.local.conftest import Background
from tests.local.test_steering import _after_model_turn, _steer

STOPPED_RUN, PAUSED_RUN = "vocab-stopped", "vocab-paused"


def _cli(stack, capsys, *argv: str) -> tuple[int, str]:
    code = main([*argv, "--stack", stack.assembly.stack_name, "--region", "us-east-1"])
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return code, out.out


def _backend(stack) -> Backend:
    inspector = RunInspector(
        stack.state_machine_arn,
        stack.outputs["CheckpointTableName"],
        stack.outputs["ApprovalsTableName"],
        sfn=stack.client("stepfunctions"),
        dynamodb=stack.client("dynamodb"),
    )
    return Backend(inspector, _steer(stack))


def _surfaces(stack, capsys, run_id: str) -> dict[str, object]:
    """The status of ``run_id`` as each surface says it (and ``status``'s exit code)."""
    seen: dict[str, object] = {}
    _, out = _cli(stack, capsys, "runs", "--output", "json")
    seen["runs"] = next(r["status"] for r in json.loads(out) if r["run_id"] == run_id)
    _, out = _cli(stack, capsys, "runs", "--where", f"run_id={run_id}", "--output", "json")
    seen["runs --where"] = json.loads(out)["runs"][0]["status"]
    _, out = _cli(stack, capsys, "show", run_id, "--output", "json")
    seen["show"] = json.loads(out)["state"]["status"]
    code, out = _cli(stack, capsys, "status", run_id, "--output", "json")
    seen["status"] = json.loads(out)["status"]
    seen["status exit"] = code
    seen["ui"] = _backend(stack).run(run_id)["status"]
    return seen


@pytest.fixture(scope="module")
def stopped(stack, triage):
    hook = _after_model_turn(stack, STOPPED_RUN, 3, lambda: _steer(stack).stop(STOPPED_RUN, "wrong ticket queue"))
    try:
        report = run_scenario(stack, triage, RunOptions(run_id=STOPPED_RUN))
    finally:
        stack.dispatcher.after_invoke.remove(hook)
    assert report["status"] == "SUCCEEDED"  # Step Functions' word: the execution ended at a step boundary
    return STOPPED_RUN


def test_a_stopped_run_is_stopped_everywhere_and_exits_1(stack, stopped, capsys):
    assert _surfaces(stack, capsys, stopped) == {
        "runs": "stopped",
        "runs --where": "stopped",
        "show": "stopped",
        "status": "stopped",
        "status exit": 1,
        "ui": "stopped",
    }
    index = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb")).get(stopped, keys.RUN_INDEX_RECORD)
    assert index["status"] == run_status.STOPPED
    code, out = _cli(stack, capsys, "status", stopped)
    assert code == 1 and out.startswith(f"run {stopped}: stopped (wrong ticket queue)")
    code, out = _cli(stack, capsys, "watch", stopped)
    assert code == 1 and out.splitlines()[-1] == f"run {stopped}: stopped (wrong ticket queue)"
    code, out = _cli(stack, capsys, "watch", stopped, "--output", "json")
    ended = json.loads(out.splitlines()[-1])
    assert code == 1 and (ended["status"], ended["execution_status"], ended["reason"]) == ("stopped", "SUCCEEDED", "wrong ticket queue")
    code, out = _cli(stack, capsys, "runs", "--status", "stopped", "--output", "json")
    assert code == 0 and stopped in [r["run_id"] for r in json.loads(out)]
    assert all(r["status"] == "stopped" for r in json.loads(out))
    code, out = _cli(stack, capsys, "runs", "--status", "succeeded", "--output", "json")
    assert stopped not in [r["run_id"] for r in json.loads(out)]  # a stopped run is not a success
    code, out = _cli(stack, capsys, "runs", "--where", "status=stopped", "--output", "json")
    assert stopped in [r["run_id"] for r in json.loads(out)["runs"]]


def test_stopped_runs_as_the_aws_cli_prints_them(stack, stopped, capsys):
    """``runs --status stopped --output table``: a boxed table with UTC times and ages;
    ``--query '[].run_id' --output text``: the ids on one line, tab-separated."""
    code, out = _cli(stack, capsys, "runs", "--status", "stopped", "--output", "table")
    lines = out.splitlines()
    assert code == 0 and lines[1].strip("|").strip() == "runs" and set(lines[0]) == {"-"} and lines[2].startswith("+-")
    header = [h.strip() for h in lines[3].strip("|").split("|")]
    assert header[:5] == ["run_id", "status", "reason", "since", "age_seconds"]
    (row,) = [[c.strip() for c in line.strip("|").split("|")] for line in lines[5:-1] if stopped in line]
    assert row[1:3] == ["stopped", "wrong ticket queue"], row
    assert re.fullmatch(r"20\d\d-\d\d-\d\d \d\d:\d\d:\d\dZ", row[3]) and re.fullmatch(r"(\d+[smhd] ?)+", row[4]), row
    code, out = _cli(stack, capsys, "runs", "--status", "stopped", "--query", "[].run_id", "--output", "text")
    assert code == 0 and out.endswith("\n") and stopped in out.rstrip("\n").split("\t") and out.count("\n") == 1
    code, out = _cli(stack, capsys, "runs", "--where", "status=stopped", "--query", "runs[].[run_id, status]", "--output", "text")
    assert code == 0 and f"{stopped}\tstopped" in out.splitlines()


def test_a_paused_run_is_paused_everywhere(stack, triage, capsys):
    hook = _after_model_turn(stack, PAUSED_RUN, 2, lambda: _steer(stack).pause(PAUSED_RUN))
    background = Background(stack, triage, RunOptions(run_id=PAUSED_RUN))
    try:
        wait_until(
            "the run parked on Pause",
            lambda: any(i.task == "pause" and i.event.get("run_id") == PAUSED_RUN for i in stack.dispatcher.invocations),
        )
        assert _surfaces(stack, capsys, PAUSED_RUN) == {
            "runs": "paused",
            "runs --where": "paused",
            "show": "paused",
            "status": "paused",
            "status exit": 0,  # not ended: not a failure
            "ui": "paused",
        }
        code, out = _cli(stack, capsys, "status", PAUSED_RUN, "--output", "json")
        assert json.loads(out)["reason"] == "paused by test"  # who paused it (the steering's `who`)
        for argv in (("runs", "--status", "paused"), ("runs", "--status", "PAUSED")):
            _, out = _cli(stack, capsys, *argv, "--output", "json")
            assert [r["run_id"] for r in json.loads(out)] == [PAUSED_RUN]
        _, out = _cli(stack, capsys, "runs", "--where", "status=paused", "--output", "json")
        assert [r["run_id"] for r in json.loads(out)["runs"]] == [PAUSED_RUN]
        _, out = _cli(stack, capsys, "runs", "--status", "running", "--output", "json")
        assert PAUSED_RUN not in [r["run_id"] for r in json.loads(out)]
        _, out = _cli(stack, capsys, "runs", "--where", "status=running", "--output", "json")
        assert PAUSED_RUN not in [r["run_id"] for r in json.loads(out)["runs"]]
        assert _steer(stack).resume(PAUSED_RUN) == "unpaused"
        report = background.result(120)
    finally:
        stack.dispatcher.after_invoke.remove(hook)
    assert report["status"] == "SUCCEEDED"
    code, out = _cli(stack, capsys, "status", PAUSED_RUN, "--output", "json")
    assert code == 0 and json.loads(out)["status"] == "succeeded"


def test_the_docs_table_is_the_vocabulary():
    """docs/operations.md's status table lists every status of ``longstep.run_status``, in order, with its exit code."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    rows = [line.split("|") for line in text.splitlines() if line.startswith("| `") and line.count("|") == 5]
    table = [(cells[1].strip().strip("`"), int(cells[3].strip())) for cells in rows]
    assert table == [(status, code) for status, _, code in run_status.table_rows()]
