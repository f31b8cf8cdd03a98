"""The operator's views of a tree of runs (events/scenarios/delegate.json: a lead run and its two
research child runs): ``runs`` draws the tree, ``show`` of the parent lists its children and what
a child waits on (an escalation), and ``show --cost`` rolls the children's cost up into the parent's.
A child's escalation that nobody answers fails the child and tells the parent's call at once.

The module deploys with a 30-day subagent timeout (the escalation timeout stays 7 days): a parent
told by its child is told at 7 days, not when its own wait would time out.
"""

from __future__ import annotations

import json

import pytest

from longstep.humans import escalations
from longstep.store import CheckpointStore
from longstep_kit import cli
from longstep_kit.local.faults import Fault
from longstep_kit.local.runner import RunOptions, run_scenario
from longstep_kit.local.stack import LocalStack
from longstep_kit.testing.wait import wait_until

from tests.local.conftest import Background, delegate_context

SUBAGENT_TIMEOUT_HOURS = 720
ESCALATION_TIMEOUT_SECONDS = 7 * 86_400  # the default


@pytest.fixture(scope="module")
def stack():
    with LocalStack(context=delegate_context(subagent_timeout_hours=SUBAGENT_TIMEOUT_HOURS)) as local:
        yield local


@pytest.fixture(scope="module")
def tree(stack, delegate):
    """A finished tree: run ``tree`` and its children ``tree-t0c0``, ``tree-t0c1``."""
    report = run_scenario(stack, delegate, RunOptions(run_id="tree"))
    assert report["status"] == "SUCCEEDED", report.get("cause")
    return report


def _cli(capsys, *argv: str) -> str:
    capsys.readouterr()
    assert cli.main(list(argv)) == 0
    return capsys.readouterr().out


def test_runs_draws_children_under_their_parent(tree, capsys):
    listed = json.loads(_cli(capsys, "runs", "--json"))
    placed = [(r["run_id"], r["depth"], r["parent"], r["status"]) for r in listed if r["run_id"].startswith("tree")]
    assert placed == [("tree", 0, None, "succeeded"), ("tree-t0c0", 1, "tree", "succeeded"), ("tree-t0c1", 1, "tree", "succeeded")]
    lines = _cli(capsys, "runs").splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("tree "))
    assert lines[at + 1].startswith("└ tree-t0c0") and lines[at + 2].startswith("└ tree-t0c1")
    assert "succeeded" in lines[at + 1] and "succeeded" in lines[at + 2]


def test_a_child_listed_without_its_parent_names_it(stack, tree):
    from longstep_kit.ops.views.status import RunState
    from longstep_kit.ops.views.tree import arrange

    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
    alone = arrange([RunState("tree-t0c1", "succeeded", 0.0)], store)
    assert alone == [(0, RunState("tree-t0c1", "succeeded", 0.0), "tree")]


def test_show_cost_rolls_the_children_up_into_the_parent(tree, capsys):
    shown = json.loads(_cli(capsys, "show", "tree", "--cost", "--json"))
    rolled = shown["cost_tree"]
    assert [r["run_id"] for r in rolled["runs"]] == ["tree", "tree-t0c0", "tree-t0c1"]
    assert rolled["runs"][0]["total"] == shown["cost"]["total"]  # the parent's own line is its own estimate
    for key in ("total", "infrastructure", "model", "storage_per_month"):
        assert rolled[key] == pytest.approx(sum(r[key] for r in rolled["runs"]))  # the sum equals its parts
    for child in rolled["runs"][1:]:  # each child's line is what its own show --cost says
        own = json.loads(_cli(capsys, "show", child["run_id"], "--cost", "--json"))
        assert own["cost"]["total"] == pytest.approx(child["total"]) and child["total"] > 0
        assert "cost_tree" not in own  # a leaf has nothing to roll up
    text = _cli(capsys, "show", "tree", "--cost")
    assert "cost of the run and its 2 child runs:" in text
    assert "└ tree-t0c0" in text and "└ tree-t0c1" in text and "tree total" in text


def test_a_childs_escalation_shows_from_the_parent(stack, delegate, capsys):
    # A permanent model error in the second child's turn 1 escalates there; nobody answers
    # (--approve external) until the test has looked at the parent, then it retries.
    run_id = "waits"
    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
    options = RunOptions(run_id=run_id, approve="external", faults=[Fault("permanent", 1, "t0c1")])
    with stack.clock.held():  # the escalation's timeout does not fire while the test looks
        background = Background(stack, delegate, options)
        wait_until("the child's escalation", lambda: escalations.pending_escalations(store, f"{run_id}-t0c1"), 30.0)
        wait_until("the other child's end", lambda: _child_done(store, run_id, 0), 30.0)

        shown = json.loads(_cli(capsys, "show", run_id, "--json"))
        assert shown["state"]["status"] == "running"
        assert shown["state"]["detail"].startswith(f"waiting for child run: {run_id}-t0c1 escalated (ModelTurn turn 1")
        kids = {k["child_run_id"]: k for k in shown["children"]}
        assert kids[f"{run_id}-t0c0"]["status"] == "succeeded"
        assert kids[f"{run_id}-t0c1"]["status"] == "running" and kids[f"{run_id}-t0c1"]["state"]["status"] == "escalated"
        assert "ModelAccessError" in kids[f"{run_id}-t0c1"]["state"]["detail"]
        text = _cli(capsys, "show", run_id)
        assert f"child run {run_id}-t0c1: research for turn 0 call 1, running; now escalated since" in text
        listed = {r["run_id"]: r for r in json.loads(_cli(capsys, "runs", "--json"))}
        assert listed[run_id]["detail"].startswith(f"waiting for child run: {run_id}-t0c1 escalated")
        assert listed[f"{run_id}-t0c1"]["status"] == "escalated" and listed[f"{run_id}-t0c1"]["parent"] == run_id

        assert _cli(capsys, "resolve", f"{run_id}-t0c1", "1", "--retry").startswith("retry")

    report = background.result()
    assert report["status"] == "SUCCEEDED", report.get("cause")
    assert "tripled the load" in report["output"]


def test_a_childs_unanswered_escalation_tells_the_parent_at_once(stack, delegate):
    # Nobody answers the child's escalation: at its timeout the child fails and tells the parent's
    # call (TellParentUnanswered), which goes on at once instead of waiting out its 30 days.
    run_id = "unanswered"
    report = run_scenario(stack, delegate, RunOptions(run_id=run_id, approve="external", faults=[Fault("permanent", 1, "t0c1")]))
    assert report["status"] == "SUCCEEDED", report.get("cause")
    assert report["virtual_seconds"] == pytest.approx(ESCALATION_TIMEOUT_SECONDS, abs=60)
    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
    errors = [s.result["content"]["error"] for s in store.steps(run_id) if s.kind == "tool" and s.result["status"] == "error"]
    assert errors == [f"the subagent research failed: run {run_id}-t0c1 failed: no human answered its escalation before it timed out"]
    arn = f"{stack.state_machine_arn.replace(':stateMachine:', ':execution:')}:{run_id}-t0c1"
    assert stack.client("stepfunctions").describe_execution(executionArn=arn)["error"] == "EscalationTimedOut"


def _child_done(store: CheckpointStore, run_id: str, call: int) -> bool:
    from longstep_kit.ops.views.tree import child_runs

    return any(c.call == call and c.status == "succeeded" for c in child_runs(store, run_id))
