"""A real SIGKILL of a Lambda worker mid-write, on a served stack whose Lambdas run in worker processes.

The stack is served (moto's server on a loopback port) with ``isolate_lambdas``: every invocation
runs in a worker process (``local/worker_pool.py``) whose AWS calls reach the served endpoint
over HTTP. ``kill.TASK@N[:OP]`` has the endpoint carry out the write and then SIGKILL the worker
before the response leaves. The run must end as the unfaulted one does: the same transcript, the
same effects counted from the agent's own ledgers (duplicate_effects 0), and the killed worker
really died by SIGKILL (its return code), reported to the engine as Lambda reports it.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess

import pytest

from longstep_kit.local.faults import FaultSpecError, parse_fault
from longstep_kit.local.runner import RunOptions, run_scenario
from longstep_kit.local.serve import LocalServer, free_port
from tests.conftest import campaign

from .test_crash_campaign import _assert_same_run

_names = itertools.count()
# Each names the write it follows by its task, operation and table (indices from 0): the same
# write every run, whatever a warm worker skips. Turn 2 files a ticket (keyed), turn 3 updates
# two in parallel, turn 1 stores a 300 KB document in S3, turn 5 sends an email (at most once, approved).
KILLS = [
    "kill.ModelTurn@0:PutItem:Checkpoints",  # the first model step's claim: written, its worker gone
    "kill.call_tool@0:PutObject",  # a large tool output is in S3, its step not recorded
    "kill.call_tool@0:PutItem:tickets",  # file_ticket's ticket is filed, its step not recorded
    "kill.call_tool@1:UpdateItem:tickets",  # one of update_ticket's updates (two calls in parallel)
    "kill.request_approval@0:PutItem:Checkpoints",  # the approval step's claim, before any request is made
]


@pytest.fixture(scope="module")
def served(stack):
    server = LocalServer(stack, port=free_port(), isolate_lambdas=True)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _run(stack, triage, *specs):
    stack.reset_data()
    first = len(stack.dispatcher.invocations)
    plan = [parse_fault(spec) for spec in specs]
    report = run_scenario(stack, triage, RunOptions(run_id="triage", execution_name=f"kill-{next(_names)}", faults=plan, timeout_seconds=180))
    return report, stack.dispatcher.invocations[first:]


@pytest.fixture(scope="module")
def clean(stack, triage, served):
    report, invocations = _run(stack, triage)
    assert report["status"] == "SUCCEEDED" and report["effects"]["duplicate_effects"] == 0
    pids = {inv.pid for inv in invocations}
    assert None not in pids and os.getpid() not in pids  # every invocation ran in a worker process
    return report


def test_an_isolated_run_is_the_in_process_run(stack, triage, clean):
    pool, stack.dispatcher.isolation = stack.dispatcher.isolation, None  # this one in-process
    try:
        report, invocations = _run(stack, triage)
    finally:
        stack.dispatcher.isolation = pool
    assert {inv.pid for inv in invocations} == {None}
    _assert_same_run(report, clean)
    # What really ran is counted from the workers' step points as from this process's.
    assert (report["model_calls"], report["tool_calls"]) == (clean["model_calls"], clean["tool_calls"])
    assert clean["model_calls"]["executed"] > 0


def _retried(event):
    """What a Retry passes again: the same input (its task token aside)."""
    return {k: v for k, v in event.items() if k != "token"} if isinstance(event, dict) else event


# The suite kills a worker mid-write of a step's claim and of a tool's effect; `make campaign` kills at every write.
@pytest.mark.parametrize("spec", campaign(KILLS, {"kill.ModelTurn@0:PutItem:Checkpoints", "kill.call_tool@0:PutItem:tickets"}.__contains__))
def test_a_worker_killed_mid_write_costs_one_retry(stack, triage, clean, spec):
    report, invocations = _run(stack, triage, spec)
    _assert_same_run(report, clean)
    assert report["faults_unfired"] == []
    (fired,) = report["faults_injected"]
    assert fired["point"] == parse_fault(spec).point
    (dead,) = [inv for inv in invocations if inv.exit_code is not None]
    assert dead.pid == fired["pid"] and dead.exit_code == -signal.SIGKILL  # really killed, by SIGKILL
    assert dead.task == fired["point"].partition(".")[2]
    # Reported as Lambda reports a sandbox that exits, so the state machine's Retry ran it again.
    assert dead.error["errorType"] == "Runtime.ExitError"
    assert dead.error["errorMessage"].endswith("Error: Runtime exited with error: signal: killed")
    later = invocations[invocations.index(dead) + 1 :]
    assert any(inv.function == dead.function and _retried(inv.event) == _retried(dead.event) for inv in later)  # run again
    assert report["escalations"] == []
    assert [a["status"] for a in report["approvals"]] == [a["status"] for a in clean["approvals"]]


def test_a_killed_workers_claim_left_to_run_out_is_outlasted(stack, triage, clean, served, monkeypatch):
    # As in AWS: nothing ends the dead sandbox's claim; the retries wait on it (StepInProgressError,
    # the lock-wait retrier) until its lease is over, on the virtual clock, and then take the step.
    monkeypatch.setattr(served.worker_routes, "end_claims", False)
    report, invocations = _run(stack, triage, "kill.call_tool@0:PutItem:outbox")
    _assert_same_run(report, clean)
    waited = [inv.error["errorType"] for inv in invocations if inv.error is not None]
    assert waited[0] == "Runtime.ExitError" and set(waited[1:]) == {"StepInProgressError"}, waited


def test_kills_at_several_points_of_one_run_and_one_that_never_fires(stack, triage, clean):
    plan = ["kill.model_turn@3:PutItem:Checkpoints", "kill.CallTool@0:PutItem:outbox", "kill.request_approval@2:PutItem:Checkpoints"]
    report, invocations = _run(stack, triage, *plan, "kill.call_tool@5000:PutObject")
    _assert_same_run(report, clean)
    assert report["faults_unfired"] == ["kill.call_tool@5000:PutObject"]  # planned, never reached: said so
    assert sorted(f["point"] for f in report["faults_injected"]) == ["kill.call_tool", "kill.model_turn", "kill.request_approval"]
    assert [inv.exit_code for inv in invocations if inv.exit_code is not None] == [-signal.SIGKILL] * 3


@pytest.mark.parametrize(
    ("spec", "says"),
    [("kill.NoSuchTask@0", "unknown task 'NoSuchTask'"), ("kill.call_tool@x", "N a number"), ("kill.call_tool@0:Scan", "unknown operation 'Scan'")],
)
def test_a_bad_kill_is_refused_in_one_line(spec, says):
    with pytest.raises(FaultSpecError) as caught:
        parse_fault(spec)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_a_workers_calls_are_checked_against_its_functions_role(stack, served, monkeypatch):
    lam = stack.client("lambda")
    (fn,) = [f for f in lam.list_functions()["Functions"] if f["FunctionName"].startswith("Longstep-AgentCallTooltriage")]
    event = json.dumps({"run_id": "no-such-run", "turn": 0, "call": 0, "tool": "search_docs", "approval": False, "wait": "none"})
    granted = json.loads(lam.invoke(FunctionName=fn["FunctionName"], Payload=event)["Payload"].read())
    assert granted["errorType"] == "InvalidInputError"  # it read the checkpoints: no such run
    monkeypatch.setitem(stack.enforcement.policies.roles, fn["Role"], [])  # the role allows nothing now
    first = len(stack.dispatcher.invocations)
    denied = json.loads(lam.invoke(FunctionName=fn["FunctionName"], Payload=event)["Payload"].read())
    assert "AccessDeniedException" in denied["errorMessage"] and fn["Role"].rsplit("/", 1)[1] in denied["errorMessage"]
    assert stack.dispatcher.invocations[first].pid not in (None, os.getpid())  # refused in a worker process


def test_other_faults_are_refused_where_the_lambdas_run_in_workers(stack, triage, served):
    from longstep_kit.local.runner import LocalRunError

    with pytest.raises(LocalRunError, match=r"^fault after_model@1: the Lambdas run in worker processes"):
        run_scenario(stack, triage, RunOptions(run_id="triage", execution_name=f"kill-{next(_names)}", faults=[parse_fault("after_model@1")]))


def test_local_run_with_a_kill_runs_its_lambdas_in_workers_and_reports_it(tmp_path):
    from .test_serve import LONGSTEP, REPO_ROOT, _env

    report = tmp_path / "report.json"
    argv = [*LONGSTEP, "local", "run", "events/scenarios/triage.json", "--fault", "kill.CallTool@0:PutItem:outbox", "--fault", "kill.call_tool@99"]
    done = subprocess.run([*argv, "--report", str(report)], cwd=REPO_ROOT, env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    data = json.loads(report.read_text())
    assert data["status"] == "SUCCEEDED" and data["effects"]["duplicate_effects"] == 0
    assert [f["point"] for f in data["faults_injected"]] == ["kill.call_tool"] and data["faults_unfired"] == ["kill.call_tool@99"]
    assert "Runtime exited with error: signal: killed" in done.stdout
    assert "  faults that never fired (1, their step never ran): kill.call_tool@99" in done.stdout.splitlines()
    assert "127.0.0.1 - -" not in done.stdout + done.stderr  # the endpoint's request log is not the terminal's


def test_local_run_refuses_a_kill_mixed_with_faults_workers_would_not_feel():
    from .test_serve import LONGSTEP, REPO_ROOT, _env

    argv = [*LONGSTEP, "local", "run", "events/scenarios/triage.json", "--fault", "kill.call_tool@0", "--fault", "after_model@1"]
    done = subprocess.run(argv, cwd=REPO_ROOT, env=_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("error: --fault after_model@1: not with a kill.TASK@N fault"), done.stderr
