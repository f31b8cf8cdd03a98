"""``longstep smoke --endpoint-url`` against ``longstep local serve``: the smoke's runs go through the
served stack's own doors (the alias, the approval pages, EventBridge, StopExecution and resume, a
pause) and each report is compared with the scenario's local run. Every wait is bounded."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from longstep_kit.local.endpoint_guard import TOKEN_ENV
from longstep_kit.local.serve import free_port
from longstep_kit.testing.wait import wait_until
from tests.local.conftest import terminate

REPO_ROOT = Path(__file__).resolve().parents[2]
LONGSTEP = [sys.executable, "-m", "longstep_kit.cli"]


def _env() -> dict[str, str]:
    # No AWS settings at all: against a local endpoint the CLI needs no Region and no credentials.
    return {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}


def _as_from_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("smoke")
    port, ready, log = free_port(), tmp / "ready.json", (tmp / "serve.log").open("w")
    # Into a file: a pipe nobody reads while the tests run fills up and blocks the server.
    proc = subprocess.Popen(
        [*LONGSTEP, "local", "serve", "--port", str(port), "--pages-port", str(free_port()), "--ready-file", str(ready)],
        cwd=REPO_ROOT,
        env=_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=_as_from_a_terminal,
    )
    try:
        wait_until("the server to be ready", lambda: ready.exists() or proc.poll() is not None, 180, first_poll=0.2, max_poll=0.3)
        assert proc.poll() is None, (tmp / "serve.log").read_text()[-3000:]
        yield json.loads(ready.read_text())
    finally:
        terminate(proc)
        log.close()


def _smoke(info: dict, *argv: str) -> subprocess.CompletedProcess:
    env = {**_env(), TOKEN_ENV: info["token"]}
    command = [*LONGSTEP, "smoke", "--endpoint-url", info["endpoint_url"], "--pages-url", info["pages_url"], *argv]
    return subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=180)


def test_smoke_against_local_serve_passes_with_crash_pause_approvals_and_a_signal(served):
    done = _smoke(
        served,
        "--scenario",
        "events/scenarios/triage.json",
        "--scenario",
        "events/scenarios/wait_for_event.json",
        "--output",
        "json",
        "--timeout",
        "120",
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    rows = {row["scenario"]: row for row in json.loads(done.stdout)}
    assert set(rows) == {"triage", "wait_for_event"}
    for row in rows.values():
        assert row["result"] == "PASS" and row["status"] == "SUCCEEDED" and row["duplicates"] == 0, row
    assert rows["triage"]["also"] == "crash+resume, pause+resume"
    assert rows["triage"]["transcript_exact_equal"] and rows["wait_for_event"]["transcript_exact_equal"]
    progress = done.stderr
    assert "approval turn 5 call 0 send_email: approve (on its page)" in progress
    assert "approval turn 7 call 0 send_email: edit (on its page)" in progress
    assert "signal ci_finished on the bus (its wait is parked)" in progress
    assert "crashed the execution" in progress and "resumed after the crash" in progress
    assert "Traceback" not in progress


def test_smoke_skips_what_the_served_stack_cannot_run_and_refuses_nothing_to_run(served):
    done = _smoke(served, "--scenario", "events/scenarios/delegate.json")
    assert done.returncode == 2
    assert done.stderr.startswith("error: --scenario: nothing to run here (delegate: agent lead, research not on the served stack")


def test_the_smoke_tables_show_each_scenario_with_a_result():
    from longstep_kit.cli.smoke_cmd import _longest_wait, _why_not
    from longstep_kit.local.scenario import load_scenario

    scenarios = {p.stem: load_scenario(p) for p in (REPO_ROOT / "events" / "scenarios").glob("*.json") if p.stem != "release"}
    # On an account, waits of days cannot be run; on a local server its clock skips them.
    assert _longest_wait(scenarios["wait_for_timer"]) == 172800
    assert _longest_wait(scenarios["wait_for_event"]) == 259200  # the rollback alarm nobody sends
    assert _longest_wait(scenarios["approvals"]) == 7 * 24 * 3600  # the approval nobody answers
    assert _longest_wait(scenarios["triage"]) == 0
    assert _why_not(scenarios["triage"], served=False) is None
    assert "waits 48 h of real time" in _why_not(scenarios["wait_for_timer"], served=False)
    assert _why_not(scenarios["wait_for_timer"], served=True, deployed={"triage"}) is None


def test_seed_loads_a_scenarios_world_into_the_served_stack(served):
    import boto3

    env = _env()
    done = subprocess.run(
        [*LONGSTEP, "seed", "events/scenarios/wait_for_timer.json", "--endpoint-url", served["endpoint_url"]],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "seeded stack Longstep for agent triage: 1 tickets (from events/scenarios/wait_for_timer.json)"
    session = boto3.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name="us-east-1")
    lam = session.client("lambda", endpoint_url=served["endpoint_url"])
    names = [
        (fn.get("Environment") or {}).get("Variables", {}).get("LONGSTEP_TABLE_TICKETS")
        for page in lam.get_paginator("list_functions").paginate()
        for fn in page["Functions"]
    ]
    table = next(n for n in names if n)
    items = session.client("dynamodb", endpoint_url=served["endpoint_url"]).scan(TableName=table)["Items"]
    assert "BUG-102" in [i["ticket_id"]["S"] for i in items]
    worldless = subprocess.run(
        [*LONGSTEP, "seed", "events/scenarios/approvals.json", "--endpoint-url", served["endpoint_url"]],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert worldless.returncode == 2 and "has no world to seed" in worldless.stderr
