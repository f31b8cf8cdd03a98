"""One clock for every time the user sees against ``longstep local serve``: the records, the
executions' dates, their histories and the CLI's "now" are all the stack's virtual clock.

The stack is served in this process with its clock at the virtual epoch (months from the host's
time, so a time read from the wrong clock is off by months) and held nearly still; the CLI runs in
separate processes against ``--endpoint-url``, as a user's shell does. After ``local advance 2d``,
``runs`` ages the waiting run by two days, and no step is shown recorded before its execution
started."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from longstep_kit.cli.serve_cmd import _prepare
from longstep_kit.local.clock import EPOCH, VirtualClock
from longstep_kit.local.endpoint_guard import TOKEN_ENV
from longstep_kit.local.scenario import load_scenario
from longstep_kit.local.serve import LocalServer, RealTime, free_port
from longstep_kit.local.stack import LocalStack
from longstep_kit.testing.wait import wait_until

REPO_ROOT = Path(__file__).resolve().parents[2]
DAY = 86400.0
# Virtual seconds per real second: the clock creeps (the ticker runs) but stays within a second
# of where `local advance` puts it for the whole test.
CREEP = 0.001


def _longstep(url: str, *argv: str, token: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k != TOKEN_ENV}
    env.update({"AWS_MAX_ATTEMPTS": "1", **({TOKEN_ENV: token} if token else {})})  # no credentials, no Region: the CLI's local defaults
    done = subprocess.run(
        [sys.executable, "-m", "longstep_kit.cli", *argv, "--endpoint-url", url], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    with LocalStack(clock=VirtualClock()) as stack:
        ticker = RealTime(stack.clock, CREEP)  # as `local serve` does: no skipping, a ticker
        ticker.start()
        server = LocalServer(stack, port=free_port())
        server.start()
        try:
            start = tmp_path_factory.mktemp("one-clock") / "start.json"
            _prepare(stack, load_scenario(REPO_ROOT / "events" / "scenarios" / "triage.json"), None, str(start), server.endpoint_url)
            yield stack, server, start
        finally:
            ticker.stop()
            server.stop()


def test_after_an_advance_of_two_days_runs_ages_by_two_days_and_no_step_precedes_its_execution(served):
    stack, server, start = served
    url = server.endpoint_url
    _longstep(url, "start", "--input", f"file://{start}")

    def waiting():
        rows = json.loads(_longstep(url, "runs", "--json").stdout)
        return rows if rows and rows[0]["status"] == "waiting_for_approval" else None

    before = wait_until("the triage run waits for its approval", waiting, 60, first_poll=0.3, max_poll=0.5)[0]
    assert before["since"] >= EPOCH and before["age_seconds"] < DAY  # virtual, not the host's months later
    moved = json.loads(_longstep(url, "local", "advance", "2d", "--output", "json", token=server.token).stdout)
    assert moved["now"] - moved["before"] == 2 * DAY

    after = json.loads(_longstep(url, "runs", "--json").stdout)[0]  # no token: a signed read of the clock
    assert after["run_id"] == before["run_id"] and after["since"] == before["since"]
    assert 2 * DAY <= after["age_seconds"] - before["age_seconds"] <= 2 * DAY + 60

    view = json.loads(_longstep(url, "show", after["run_id"], "--json").stdout)
    (execution,) = view["executions"]
    assert EPOCH <= execution["started"] <= moved["before"]
    steps = [e for e in view["timeline"] if e["kind"] in ("model", "tool")]
    assert len(steps) >= 5
    # To the second, as `show` prints them (an approval request's time is kept to the second).
    early = [(e["kind"], e["name"], e["at"]) for e in view["timeline"] if int(e["at"]) < int(execution["started"])]
    assert early == [], f"shown recorded before the execution started at {execution['started']}"
    assert all(a["started"] >= execution["started"] for a in view["attempts"])

    # What moto answers any SDK: the history on the same clock as the records.
    import boto3

    sfn = boto3.client("stepfunctions", region_name="us-east-1")  # moto's backend, in this process
    arn = stack.state_machine_arn.replace(":stateMachine:", ":execution:") + f":{execution['name']}"
    events = sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]
    stamps = [e["timestamp"].timestamp() for e in events]
    assert stamps == sorted(stamps) and execution["started"] <= stamps[0] and stamps[-1] <= moved["now"] + 1
    assert min(e["at"] for e in steps) >= stamps[0]
