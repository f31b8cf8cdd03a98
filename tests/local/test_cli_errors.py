"""Bad input to the ``longstep`` command: one line on stderr naming what is wrong, a documented
exit code (2 usage or bad input, 3 AWS or configuration), never a traceback. No network: AWS
calls go to a closed local port or fail before any request."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from longstep_kit.cli import main
from longstep_kit.cli.errors import EXIT_AWS, EXIT_INTERRUPTED, EXIT_USAGE, report

CLOSED = "http://127.0.0.1:9"  # the discard port: nothing listens, the connection is refused at once


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "bad_run_id.json").write_text(json.dumps({"run_id": "has space", "goal": "g", "agent": "triage"}))
    triage = json.loads(Path("events/scenarios/triage.json").read_text())
    (tmp_path / "nobody.json").write_text(json.dumps({**triage, "input": {**triage["input"], "agent": "nobody"}}))
    deep = "[" * 5000 + "]" * 5000  # Python's parser recursed: RecursionError, a traceback
    (tmp_path / "deep.json").write_text(deep)
    (tmp_path / "deep_scenario.json").write_text(json.dumps(triage)[:-1] + ', "world_extra": ' + deep + "}")
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "keep.txt").write_text("x")
    (tmp_path / "latin1.json").write_bytes(json.dumps(triage).replace("Triage", "Tri\u00e4ge").encode("latin-1"))
    waits = json.loads(Path("events/scenarios/wait_for_event.json").read_text())
    waits["signals"][1]["event"] = "ci_done"  # no scripted wait takes it: its wait would time out, the run green
    (tmp_path / "stray_signal.json").write_text(json.dumps(waits))
    (tmp_path / "bad_agent.json").write_text(json.dumps({"run_id": "r1", "goal": "g", "agent": "Bad Name!"}))
    (tmp_path / "unknown_agent.json").write_text(json.dumps({"run_id": "r1", "goal": "g", "agent": "nobody"}))
    (tmp_path / "plain_start.json").write_text(json.dumps({"run_id": "r1", "goal": "g", "agent": "triage"}))
    scripted = {"provider": "scripted", "script_uri": "s3://bucket/script.json"}
    (tmp_path / "scripted_start.json").write_text(json.dumps({"run_id": "r1", "goal": "g", "agent": "triage", "model": scripted}))
    return tmp_path


CASES = [
    # (arguments, exit code, words the one line must contain)
    (["--output", "yaml", "runs"], EXIT_USAGE, "invalid choice"),
    (["no-such-command"], EXIT_USAGE, "invalid choice"),
    (["start"], EXIT_USAGE, "--input"),
    # A local endpoint needs no Region (nor credentials): what fails is the connection.
    (["runs", "--endpoint-url", CLOSED], EXIT_AWS, "cannot reach http://127.0.0.1:9"),
    (["runs", "--endpoint-url", "https://sfn.example.com"], EXIT_AWS, "region"),
    (["runs", "--endpoint-url", "notaurl"], EXIT_USAGE, "--endpoint-url 'notaurl': not an http(s) URL"),
    (["runs", "--endpoint-url", "http://127.0.0.1:port"], EXIT_USAGE, "not a URL"),
    (["runs", "--region", "us-east-1", "--endpoint-url", CLOSED], EXIT_AWS, "cannot reach"),
    (["status", "r1", "--region", "us-east-1", "--endpoint-url", CLOSED], EXIT_AWS, "cannot reach"),
    (["start", "--input", "{tmp}/missing.json", "--region", "us-east-1"], EXIT_USAGE, "missing.json: no such file"),
    (["start", "--input", "{tmp}/broken.json", "--region", "us-east-1"], EXIT_USAGE, "not valid JSON"),
    (["start", "--input", "{tmp}/bad_run_id.json", "--region", "us-east-1"], EXIT_USAGE, "run_id"),
    (["start", "--input", "{tmp}", "--region", "us-east-1"], EXIT_USAGE, "is a directory"),
    (["local", "run", "{tmp}/missing.json"], EXIT_USAGE, "no such scenario file"),
    (["local", "run", "{tmp}/stray_signal.json"], EXIT_USAGE, "signals[1].event: no scripted wait_for waits on 'ci_done'"),
    (["local", "run", "{tmp}/latin1.json"], EXIT_USAGE, "latin1.json: not UTF-8 text (byte 0xe4"),
    (["start", "--input", "{tmp}/bad_agent.json", "--region", "us-east-1"], EXIT_USAGE, "agent: 'Bad Name!' is not an agent name"),
    (["start", "--input", "{tmp}/unknown_agent.json", "--region", "us-east-1"], EXIT_USAGE, "'nobody' is not registered in cdk.json"),
    (["runs", "--max-items", "0", "--region", "us-east-1", "--endpoint-url", CLOSED], EXIT_AWS, "cannot reach"),
    (["local", "run", "{tmp}/broken.json"], EXIT_USAGE, "JSON"),
    (["local", "run", "events/scenarios/triage.json", "--fault", "bogus@1"], EXIT_USAGE, "bogus"),
    (["local", "run", "events/scenarios/triage.json", "--faults", "random:x"], EXIT_USAGE, "random"),
    # local run: flags that could never take effect, refused before the deploy
    (["local", "run", "events/scenarios/triage.json", "--throttle", "1.5"], EXIT_USAGE, "--throttle: must be a fraction of calls between 0 and 1"),
    (["local", "run", "events/scenarios/triage.json", "--throttle", "-0.1"], EXIT_USAGE, "--throttle"),
    (["local", "run", "events/scenarios/triage.json", "--throttle", "x"], EXIT_USAGE, "--throttle"),
    (["local", "run", "events/scenarios/triage.json", "--fault", "after_model@99"], EXIT_USAGE, "turn 99 never runs"),
    (["local", "run", "events/scenarios/triage.json", "--fault", "verifier_fail@9"], EXIT_USAGE, "turn 9 never runs"),
    (["local", "run", "events/scenarios/triage.json", "--restart-at", "12"], EXIT_USAGE, "--restart-at: turn 12 never runs"),
    # an aimed fault is checked against the run it aims at (the parent's or a child run's script)
    (["local", "run", "events/scenarios/delegate.json", "--fault", "after_model@1:t9c9"], EXIT_USAGE, "never starts a run 't9c9'"),
    (["local", "run", "events/scenarios/delegate.json", "--fault", "after_model@7:t0c1"], EXIT_USAGE, "turn 7 never runs in 't0c1'"),
    (["local", "run", "events/scenarios/delegate.json", "--fault", "after_model@7"], EXIT_USAGE, "turn 7 never runs in this run or its child runs"),
    (["local", "run", "events/scenarios/triage.json", "--run-id", "has space"], EXIT_USAGE, "--run-id: 'has space' must be"),
    (["local", "run", "{tmp}/nobody.json"], EXIT_USAGE, "unknown agent 'nobody'"),
    (["local", "run", "events/scenarios/triage.json", "--time-scale", "0", "--serve"], EXIT_USAGE, "--time-scale"),
    (["local", "run", "events/scenarios/triage.json", "--port", "70000", "--serve"], EXIT_USAGE, "--port: must be 1-65535"),
    (["local", "run", "events/scenarios/triage.json", "--ready-file", "{tmp}/r.json"], EXIT_USAGE, "add --serve"),
    (["local", "run", "events/scenarios/triage.json", "--approve", "sometimes"], EXIT_USAGE, "invalid choice"),
    (["local", "serve", "--time-scale", "-1"], EXIT_USAGE, "--time-scale"),
    (["local", "serve", "--run-id", "a/b"], EXIT_USAGE, "--run-id"),
    (["local", "advance", "3 days"], EXIT_USAGE, "DURATION"),
    (["local", "advance", "3d", "--endpoint-url", CLOSED, "--timeout", "5", "--token", "t"], EXIT_AWS, "cannot reach"),
    (["local", "advance", "3d", "--endpoint-url", CLOSED], EXIT_USAGE, "--token: the serve's control token is required"),
    (["local", "serve", "--host", "0.0.0.0"], EXIT_USAGE, "--host 0.0.0.0: not a loopback address"),
    (["local", "serve", "--host", "dev.example.com"], EXIT_USAGE, "--allow-remote"),
    (["local", "run", "events/scenarios/triage.json", "--serve", "--host", "192.168.1.20"], EXIT_USAGE, "--allow-remote"),
    (["approve", "a1", "--edit", "{", "--region", "us-east-1"], EXIT_USAGE, "--edit: not valid JSON"),
    (["start", "--input", "{tmp}/deep.json", "--region", "us-east-1"], EXIT_USAGE, "deep.json: nests deeper than 32 levels"),
    (["approve", "a1", "--edit", "[" * 5000 + "]" * 5000, "--region", "us-east-1"], EXIT_USAGE, "--edit: nests deeper than 32"),
    (["signal", "r1", "ev", "--payload", "[" * 5000 + "]" * 5000, "--region", "us-east-1"], EXIT_USAGE, "--payload: nests deeper than 32"),
    (["local", "run", "{tmp}/deep_scenario.json"], EXIT_USAGE, "deep_scenario.json: nests deeper than 32"),
    (["replay", "{tmp}/deep.json"], EXIT_USAGE, "deep.json: nests deeper than 32"),
    (["resolve", "r1", "3", "--abort", "--not-happened", "--region", "us-east-1"], EXIT_USAGE, "--not-happened"),
    (["stuck", "--older-than", "2x", "--region", "us-east-1", "--endpoint-url", CLOSED], EXIT_USAGE, "2x"),
    (["init", "{tmp}/project"], EXIT_USAGE, "not empty"),
    (["init", "{tmp}/fresh", "--stack-name", "1bad"], EXIT_USAGE, "--stack-name"),
    (["vendor", "{tmp}"], EXIT_USAGE, "not a Longstep project"),
    # A local endpoint has no Bedrock: a plain start is refused at the door, saying how to script a model.
    (["start", "--input", "{tmp}/plain_start.json", "--endpoint-url", CLOSED], EXIT_USAGE, "(hint: a run on the local stack needs a scripted model"),
    (["start", "--input", "{tmp}/plain_start.json", "--endpoint-url", CLOSED], EXIT_USAGE, "longstep local serve --scenario"),
    (["start", "--input", "{tmp}/scripted_start.json", "--endpoint-url", CLOSED], EXIT_AWS, "cannot reach"),
    (["show", "r1", "--cost", "--prices", "{tmp}/missing.json", "--region", "us-east-1", "--endpoint-url", CLOSED], EXIT_USAGE, "--prices"),
]


@pytest.mark.parametrize(("argv", "code", "words"), CASES, ids=[" ".join(c[0])[:60] for c in CASES])
def test_bad_input_is_one_line_with_its_exit_code(argv, code, words, files, capsys, monkeypatch):
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # a refused connection is reported at once
    # Bad input is refused before anything is deployed (a deploy takes seconds).
    monkeypatch.setattr("longstep_kit.local.stack.LocalStack.start", lambda self: pytest.fail("deployed before checking the input"))
    monkeypatch.delenv("LONGSTEP_LOCAL_TOKEN", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_REGION", raising=False)
    argv = [a.replace("{tmp}", str(files)) for a in argv]
    try:
        got = main(argv)
    except SystemExit as exc:  # argparse's own exit
        got = exc.code
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert got == code, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert words in lines[0], lines[0]
    assert "Traceback" not in err


def test_interrupt_is_one_line_and_130(capsys):
    assert report(KeyboardInterrupt()) == EXIT_INTERRUPTED
    assert capsys.readouterr().err.strip() == "error: interrupted"


def test_an_unexpected_error_is_one_line_without_debug(capsys):
    assert report(RuntimeError("boom")) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "RuntimeError: boom" in err and "--debug" in err


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("longstep ")
