"""The CLI follows the AWS CLI's conventions: ``--input`` takes inline JSON, ``-`` for stdin and
``file://``; ``--status`` takes any case; and a reader that goes away (``longstep runs | head``)
ends the command quietly, exit 0."""

from __future__ import annotations

import io
import json
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
