"""``longstep fork RUN --at-step N`` on the local stack: a fork of a finished release run at its
two-day sleep replays every earlier step from the parent's records (no build, no publish again),
sleeps, and finishes; bad forks fail with one line and write nothing."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

import pytest

from longstep import keys
from longstep.store import CheckpointStore
from longstep.workflows import log as wf_log
from longstep_kit import cli
from longstep_kit.local.runner import RunOptions
from longstep_kit.local.stack import LocalStack
from longstep_kit.local.workflow_run import run_workflow_scenario, stack_context
from longstep_kit.testing.wait import wait_execution

from tests.local.conftest import release_ledger


@pytest.fixture(scope="module")
def stack(release):
    with LocalStack(context=stack_context(release)) as local:
        yield local


def _store(stack: LocalStack) -> CheckpointStore:
    return CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))


@pytest.fixture(scope="module")
def forked(stack, release):
    parent = run_workflow_scenario(stack, release, RunOptions(run_id="wf-src", timeout_seconds=120))
    assert parent["status"] == "SUCCEEDED", parent
    store = _store(stack)
    steps = store.query_prefix("wf-src", wf_log.STEP_PREFIX)
    (sleep,) = [wf_log.parse_step_key(item["sk"])[0] for item in steps if item.get("kind") == wf_log.SLEEP]
    before = release_ledger(stack)
    first = len(stack.dispatcher.invocations)
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli.main(["fork", "wf-src", "--at-step", str(sleep), "--run-id", "wf-fork", "--output", "json"]) == 0
    started = json.loads(out.getvalue())
    described = wait_execution(stack.client("stepfunctions"), started["execution_arn"], timeout=120)
    return {
        "parent": parent,
        "at": sleep,
        "started": started,
        "described": described,
        "before": before,
        "after": release_ledger(stack),
        "invocations": stack.dispatcher.invocations[first:],
    }


def test_the_fork_finishes_with_the_parents_replayed_results(forked):
    assert forked["started"]["workflow"] == "release" and forked["started"]["at_step"] == forked["at"]
    assert forked["described"]["status"] == "SUCCEEDED", forked["described"].get("cause")
    output, parent = json.loads(forked["described"]["output"]), forked["parent"]["output"]
    fork_output = output.get("output", output)
    # ctx.now() at step 1 and publish's result are the parent's recorded values, not new ones.
    assert fork_output["started_at"] == parent["started_at"] and fork_output["published"] == parent["published"]


def test_no_step_before_the_fork_point_runs_again(forked):
    before, after = forked["before"], forked["after"]
    assert before["build"] >= 1 and before["publish"] == 1
    assert after["build"] == before["build"] and after["publish"] == before["publish"]  # replayed, not redone
    assert after["followup"] == 1  # check-then-act: the parent's note is found, not filed twice


def test_the_fork_holds_copies_of_the_earlier_steps_and_names_its_parent(stack, forked):
    store = _store(stack)
    run = store.get("wf-fork", wf_log.RUN)
    assert json.loads(run[keys.FORKED_FROM]) == {"run_id": "wf-src", "at_step": forked["at"]}
    own = {wf_log.parse_step_key(item["sk"])[0] for item in store.query_prefix("wf-fork", wf_log.STEP_PREFIX)}
    parent = {wf_log.parse_step_key(item["sk"])[0] for item in store.query_prefix("wf-src", wf_log.STEP_PREFIX)}
    assert own == parent  # the copied steps, then the sleep and the follow-up the fork ran itself
    assert store.get("wf-src", wf_log.RUN).get(keys.FORKED_FROM) is None  # the parent is untouched


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["--at-step", "99"], "at_step"),
        (["--at-step", "1", "--goal", "another"], "--goal"),
        (["--at-step", "1", "--run-id", "bad id!"], "run_id"),
        (["--at-step", "1", "--run-id", "wf-src"], "run_id"),
    ],
)
def test_a_bad_fork_fails_with_one_line_and_writes_nothing(stack, forked, capsys, argv, field):
    store = _store(stack)
    before = {item["sk"] for item in store.query_prefix("wf-src", wf_log.PREFIX)}
    assert cli.main(["fork", "wf-src", *argv]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err, err
    assert {item["sk"] for item in store.query_prefix("wf-src", wf_log.PREFIX)} == before
