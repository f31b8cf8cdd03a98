"""``longstep local serve`` from other shells: the stack is served in one process and driven from
separate ones, with the AWS CLI, boto3 (any SDK) and the ``longstep`` CLI against
``--endpoint-url``: list the state machines, start the triage run, see it park on its approvals,
approve them, and see it finish. Every wait is bounded."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from longstep_kit.local.serve import free_port
from longstep_kit.ops.wait import wait_until

REPO_ROOT = Path(__file__).resolve().parents[2]
LONGSTEP = [sys.executable, "-m", "longstep_kit.cli"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1", "AWS_MAX_ATTEMPTS": "2"})
    return env


def _longstep(url: str, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*LONGSTEP, *argv, "--endpoint-url", url], cwd=REPO_ROOT, env=_env(), capture_output=True, text=True, timeout=120
    )


def _until(check, what: str, seconds: float = 90.0):
    # Each check may start a CLI process: poll every 0.3 s rather than from 5 ms up.
    return wait_until(what, check, seconds, first_poll=0.3, max_poll=0.3)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("serve")
    port = free_port()
    ready, start = tmp / "ready.json", tmp / "start.json"
    proc = subprocess.Popen(
        [*LONGSTEP, "local", "serve", "--port", str(port), "--scenario", "events/scenarios/triage.json",
         "--run-id", "served-1", "--input-out", str(start), "--ready-file", str(ready)],
        cwd=REPO_ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        _until(lambda: ready.exists() or proc.poll() is not None, "the server to be ready", 180)
        assert proc.poll() is None, proc.stdout.read()
        yield json.loads(ready.read_text())["endpoint_url"], start
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def _aws(url: str, *argv: str) -> subprocess.CompletedProcess:
    aws = Path(sys.executable).parent / "aws"  # the AWS CLI of the dev extra
    return subprocess.run([str(aws), *argv, "--endpoint-url", url, "--output", "json"], env=_env(), capture_output=True, text=True, timeout=120)


def test_the_aws_cli_lists_the_state_machine(served):
    url, _ = served
    listed = _aws(url, "stepfunctions", "list-state-machines")
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)["stateMachines"]) == 1


def test_an_sdk_in_another_process_sees_the_stack(served):
    url, _ = served
    import boto3

    sfn = boto3.client("stepfunctions", endpoint_url=url, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")
    names = [m["name"] for m in sfn.list_state_machines()["stateMachines"]]
    assert names, "no state machine served"


def test_a_run_started_and_approved_from_other_shells_finishes(served):
    url, start = served
    machine = json.loads(_aws(url, "stepfunctions", "list-state-machines").stdout)["stateMachines"][0]["stateMachineArn"]
    started = _aws(url, "stepfunctions", "start-execution", "--state-machine-arn", machine, "--name", "served-1", "--input", f"file://{start}")
    assert started.returncode == 0, started.stderr
    assert json.loads(started.stdout)["executionArn"].endswith(":served-1")

    def pending():
        listed = _longstep(url, "approvals", "--output", "json")
        assert listed.returncode == 0, listed.stderr
        return json.loads(listed.stdout)

    decided = 0
    while True:
        status = json.loads(_longstep(url, "status", "served-1", "--output", "json").stdout)
        if status["status"] != "RUNNING":
            break
        requests = _until(lambda: pending() or json.loads(_longstep(url, "status", "served-1", "--output", "json").stdout)["status"] != "RUNNING" and [{}], "an approval or the end")
        for request in requests:
            if "approval_id" in request:
                approved = _longstep(url, "approve", request["approval_id"], "--reason", "looks right")
                assert approved.returncode == 0, approved.stderr
                decided += 1
        assert decided <= 10
    assert status["status"] == "SUCCEEDED", status
    assert decided >= 1
    runs = json.loads(_longstep(url, "runs", "--output", "json").stdout)
    assert "served-1" in [r["run_id"] for r in runs]
    shown = _longstep(url, "show", "served-1")
    assert shown.returncode == 0 and "served-1" in shown.stdout


def test_signals_from_another_shell(served):
    url, _ = served
    refused = _longstep(url, "signal", "nobody", "go")
    assert refused.returncode == 2 and refused.stderr.startswith("error: run_id: no run")
    buffered = _longstep(url, "signal", "nobody", "go", "--buffer")
    assert buffered.returncode == 0, buffered.stderr
