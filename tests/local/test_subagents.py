"""Subagents on the local stack: a lead run delegates two questions to research child runs in one
turn (events/scenarios/delegate.json). The children run in parallel; a crash after a child started
ends with the clean transcript, the same two children, and no second child started (the crash
campaign over every step of the tree: test_subagent_crashes.py).
"""

from __future__ import annotations

import itertools
from collections import Counter
import json

import pytest

from longstep import faults
from longstep.store import CheckpointStore
from longstep.subagents import child_run_id
from longstep.child_runs import children
from longstep.subagents import CHILD_PREFIX
from longstep_kit.local.faults import Fault
from longstep_kit.local.runner import RunOptions, run_scenario
from longstep_kit.local.stack import LocalStack

from tests.local.conftest import delegate_context

_names = itertools.count()


@pytest.fixture(scope="module")
def stack():
    with LocalStack(context=delegate_context()) as local:
        yield local


def _run(stack, delegate, **options):
    stack.reset_data()
    name = f"sub-{next(_names)}"
    report = run_scenario(stack, delegate, RunOptions(run_id="delegate", execution_name=name, **options))
    return name, report


def _children(stack, name: str) -> list[str]:
    """The names of the child executions a run started under its first execution name ``name``."""
    sfn = stack.client("stepfunctions")
    listed = sfn.list_executions(stateMachineArn=stack.state_machine_arn, maxResults=1000)["executions"]
    return sorted(e["name"] for e in listed if e["name"].startswith(f"{name}-t"))


@pytest.fixture(scope="module")
def clean(stack, delegate):
    name, report = _run(stack, delegate)
    assert report["status"] == "SUCCEEDED", report.get("cause")
    return name, report


def _assert_same_run(report, clean_report):
    assert report["status"] == "SUCCEEDED", report.get("cause")
    assert report["output"] == clean_report["output"]
    assert report["transcript_sha256"] == clean_report["transcript_sha256"]
    assert report["effects"]["duplicate_effects"] == 0


def test_the_lead_gets_both_children_answers_in_one_turn(stack, clean):
    name, report = clean
    assert "tripled the load" in report["output"]
    assert _children(stack, name) == [f"{name}-t0c0", f"{name}-t0c1"]
    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
    results = {s.sk: s.result for s in store.steps("delegate") if s.kind == "tool"}
    outputs = sorted(r["content"]["output"] for r in results.values())
    assert outputs[0].startswith("Finding: during incident 2041") and outputs[1].startswith("Finding: the order service")
    records = store.query_prefix("delegate", CHILD_PREFIX)
    assert [r["child_run_id"] for r in records] == [child_run_id("delegate", 0, 0), child_run_id("delegate", 0, 1)]
    assert all(r["status"] == "done" and not r["failed"] for r in records)
    # each child is a run of its own, with its own checkpoints and final answer
    for call in (0, 1):
        child = store.get(child_run_id("delegate", 0, call), "final")
        assert child is not None and json.loads(child["output"])["output"].startswith("Finding:")


def test_show_of_the_parent_lists_its_child_runs(stack, clean, capsys):
    from longstep_kit import cli

    assert cli.main(["show", "delegate"]) == 0
    out = capsys.readouterr().out
    for call in (0, 1):
        assert f"child run {child_run_id('delegate', 0, call)}: research for turn 0 call {call}, succeeded" in out
    assert cli.main(["show", "delegate", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["children"]
    assert [(c["child_run_id"], c["status"]) for c in shown] == [(child_run_id("delegate", 0, c), "succeeded") for c in (0, 1)]


def test_a_crash_after_a_child_started_reattaches_to_the_same_child(stack, delegate, clean):
    name, report = _run(stack, delegate, faults=[Fault(faults.CHILD_STARTED, 0)])
    _assert_same_run(report, clean[1])
    assert [f["point"] for f in report["faults_injected"]] == [faults.CHILD_STARTED]
    assert _children(stack, name) == [f"{name}-t0c0", f"{name}-t0c1"]  # no second child
    assert report["model_calls"]["executed"] == clean[1]["model_calls"]["executed"]  # no child ran twice


def test_a_child_aborted_at_an_escalation_comes_back_as_a_failed_call(stack, delegate):
    # A permanent model error in turn 1 hits a child (the children reach turn 1 before the lead);
    # --approve reject aborts its escalation: the child fails, tells its parent's call
    # (SubagentFailed), and the lead's model is told, as the call's result, and carries on.
    name, report = _run(stack, delegate, faults=[Fault("permanent", 1)], approve="reject")
    assert report["status"] == "SUCCEEDED", report.get("cause")
    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
    results = [s.result for s in store.steps("delegate") if s.kind == "tool"]
    assert sorted(r["status"] for r in results) == ["error", "success"]
    (failed,) = [r for r in results if r["status"] == "error"]
    assert "the subagent research failed" in failed["content"]["error"] and "aborted" in failed["content"]["error"]
    statuses = sorted(c["status"] for c in children(store, "delegate"))
    assert statuses == ["failed", "succeeded"]
    sfn = stack.client("stepfunctions")
    listed = sfn.list_executions(stateMachineArn=stack.state_machine_arn, maxResults=1000)["executions"]
    assert sorted(e["status"] for e in listed if e["name"].startswith(f"{name}-t")) == ["FAILED", "SUCCEEDED"]


def test_a_child_whose_init_fails_for_good_tells_its_parent_when_aborted(stack, delegate, monkeypatch):
    # Init fails before the child's run record exists: the abort's TellParent finds the parent
    # in the start input, and the lead's model is told at once (not after its call's timeout).
    import importlib

    from longstep.errors import ModelAccessError

    init_run = importlib.import_module("longstep_functions.init_run")
    real = init_run.lambda_handler

    def failing_for_children(event, context):
        if str(event.get("run_id", "")).startswith("delegate-"):
            raise ModelAccessError("injected permanent failure in a child's Init")
        return real(event, context)

    monkeypatch.setattr(init_run, "lambda_handler", failing_for_children)
    name, report = _run(stack, delegate, approve="reject")
    assert report["status"] == "SUCCEEDED", report.get("cause")
    assert report["virtual_seconds"] < 86_400  # told at once, not at the 7-day subagent timeout
    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
    results = [s.result for s in store.steps("delegate") if s.kind == "tool"]
    assert [r["status"] for r in results] == ["error", "error"]
    assert all("aborted" in r["content"]["error"] for r in results)
    sfn = stack.client("stepfunctions")
    listed = sfn.list_executions(stateMachineArn=stack.state_machine_arn, maxResults=1000)["executions"]
    assert sorted(e["status"] for e in listed if e["name"].startswith(f"{name}-t")) == ["FAILED", "FAILED"]


def test_the_parent_runs_nothing_while_its_children_run(stack, delegate):
    # The parent's own history: one Lambda invocation per step it took (Init, two model turns,
    # two delegations, two tool results, Finish): no polling while the children ran.
    name, report = _run(stack, delegate)
    assert report["status"] == "SUCCEEDED"
    sfn = stack.client("stepfunctions")
    arn = f"{stack.state_machine_arn.replace(':stateMachine:', ':execution:')}:{name}"
    events = sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]
    scheduled = Counter()
    for event in events:
        if "taskScheduledEventDetails" in event:  # lambda:invoke integrations (the task-token ones, CallTool)
            function = json.loads(event["taskScheduledEventDetails"]["parameters"])["FunctionName"]
        elif "lambdaFunctionScheduledEventDetails" in event:  # plain function ARNs (Init, ModelTurn, Finish)
            function = event["lambdaFunctionScheduledEventDetails"]["resource"]
        else:
            continue
        # arn:aws:lambda:region:account:function:NAME:VERSION (the state machine calls versions)
        scheduled[function.split(":")[6].split("-")[1].rstrip("0123456789ABCDEF")] += 1
    assert scheduled == {"AgentInitRun": 1, "AgentModelTurn": 2, "AgentDelegateToSubagent": 2, "AgentCallToollead": 2, "AgentFinish": 1}
