"""The CLI follows the AWS CLI's conventions: ``--input`` takes inline JSON, ``-`` for stdin and
``file://``; ``--status`` takes any case; and a reader that goes away (``longstep runs | head``)
ends the command quietly, exit 0."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys

import pytest

from longstep_kit.cli import main, parser
from longstep_kit.testing import wait_execution


@pytest.mark.parametrize("how", ["inline", "file", "stdin", "path"])
def test_start_input_is_inline_json_stdin_a_file_url_or_a_path(stack, tmp_path, monkeypatch, capsys, how):
    payload = {"run_id": f"conventions-{how}", "agent": "triage", "goal": "Say hello.", "max_turns": 1}
    path = tmp_path / "start.json"
    path.write_text(json.dumps(payload))
    value = {"inline": json.dumps(payload), "file": f"file://{path}", "stdin": "-", "path": str(path)}[how]
    if how == "stdin":
        monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(payload)))
    assert main(["start", "--input", value, "--state-machine-arn", stack.alias_arn]) == 0
    arn = capsys.readouterr().out.strip()
    assert arn.endswith(f":conventions-{how}")
    assert wait_execution(stack.client("stepfunctions"), arn)["status"] in ("SUCCEEDED", "FAILED")


def test_a_bad_inline_input_is_one_line_naming_it(stack, capsys):
    assert main(["start", "--input", '{"run_id": ', "--state-machine-arn", stack.alias_arn]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --input") and "\n" not in err


def test_status_filters_take_any_case():
    assert parser().parse_args(["runs", "--status", "RUNNING"]).status == "running"
    assert parser().parse_args(["runs", "--status", "Waiting_For_Approval"]).status == "waiting_for_approval"


def test_a_reader_that_goes_away_ends_the_command_quietly():
    # `runs` printing far more than a pipe holds, read by something that stops after one line.
    code = (
        "import longstep_kit.cli.views_cmds as views\n"
        "def many(args):\n"
        "    for i in range(200000):\n"
        "        print('run-%06d  running' % i)\n"
        "    return 0\n"
        "views.cmd_runs = many\n"
        "from longstep_kit.cli import main\n"
        "raise SystemExit(main(['runs']))\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().startswith("run-000000")
    proc.stdout.close()  # `head -1` exits
    assert proc.wait(timeout=60) == 0
    assert proc.stderr.read() == ""


def test_query_output_table_and_paging_on_list_commands(stack, capsys):
    from longstep_kit.local.runner import RunOptions, run_scenario
    from longstep_kit.local.scenario import load_scenario

    scenario = load_scenario("events/scenarios/wait_for_timer.json")
    for run_id in ("paging-a", "paging-b", "paging-c"):
        assert run_scenario(stack, scenario, RunOptions(run_id=run_id))["status"] == "SUCCEEDED"
    capsys.readouterr()
    common = ["--state-machine-arn", stack.state_machine_arn, "--checkpoint-table", stack.outputs["CheckpointTableName"]]
    assert main(["runs", *common, "--query", "[?starts_with(run_id, 'paging-')].run_id"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert sorted(listed) == ["paging-a", "paging-b", "paging-c"]
    assert main(["runs", *common, "--output", "table", "--query", "[?run_id=='paging-b'].{run: run_id, status: status}"]) == 0
    assert capsys.readouterr().out.splitlines() == [  # boxed, as the AWS CLI's table
        "----------------------------",
        "|           runs           |",
        "+------------+-------------+",
        "|    run     |    status   |",
        "+------------+-------------+",
        "|  paging-b  |  succeeded  |",
        "+------------+-------------+",
    ]
    assert main(["runs", *common, "--output", "text", "--query", "[?starts_with(run_id, 'paging-')].run_id"]) == 0
    assert sorted(capsys.readouterr().out.rstrip("\n").split("\t")) == ["paging-a", "paging-b", "paging-c"]  # tab-separated, one line
    assert main(["runs", *common, "--output", "text", "--query", "[?run_id=='paging-b'].[run_id, status]"]) == 0
    assert capsys.readouterr().out == "paging-b\tsucceeded\n"
    assert main(["runs", *common, "--output", "table", "--query", "[?run_id=='paging-b']"]) == 0
    shown = capsys.readouterr().out
    assert re.search(r"\|  20\d\d-\d\d-\d\d \d\d:\d\d:\d\dZ +\|", shown) and "e+09" not in shown and ".0 " not in shown, shown
    assert main(["runs", *common, "--output", "json", "--max-items", "1"]) == 0
    first = capsys.readouterr()
    token = first.err.strip().removeprefix("more: --starting-token ")
    assert len(json.loads(first.out)) == 1 and token != first.err.strip()
    assert main(["runs", *common, "--output", "json", "--starting-token", token]) == 0
    rest = json.loads(capsys.readouterr().out)
    assert json.loads(first.out)[0]["run_id"] not in [r["run_id"] for r in rest] and len(rest) >= 2
    assert main(["runs", *common, "--query", "[?"]) == 2
    assert capsys.readouterr().err.startswith("error: --query '[?': ")
    assert main(["runs", *common, "--starting-token", "nope"]) == 2


def test_a_command_outside_a_project_is_a_usage_error(tmp_path, monkeypatch, capsys):
    from pathlib import Path

    (tmp_path / "scenario.json").write_text(Path("events/scenarios/triage.json").read_text())
    monkeypatch.chdir(tmp_path)
    assert main(["local", "run", "scenario.json"]) == 2
    assert capsys.readouterr().err.startswith("error: no Longstep project (cdk.json and app.py) in ")


def test_serve_refuses_a_taken_port_before_deploying(capsys):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["local", "serve", "--port", str(port)]) == 2
    assert capsys.readouterr().err.startswith(f"error: --port {port}: 127.0.0.1:{port} is in use")


def test_the_sdks_retries_are_announced_once(capsys, monkeypatch):
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "3")
    assert main(["runs", "--endpoint-url", "http://127.0.0.1:9"]) == 3
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "note: http://127.0.0.1:9 does not answer; retrying (the SDK's retries, a few seconds)..."
    assert err[1].startswith("error: cannot reach http://127.0.0.1:9/") and len(err) == 2
