"""Crash campaign of the delegate scenario (events/scenarios/delegate.json): a lead run delegates
two questions to research child runs in one turn. A crash at every fault point of every step of
the parent AND of each child (``Fault(..., run=...)`` aims at one run), and a restart of the
parent while its children run, each end with the clean run's transcripts (the parent's, which
holds the children's answers, and each child's own), the same two children, and no duplicate effect.
"""

from __future__ import annotations

import itertools

import pytest

from tests.conftest import campaign

from longstep import faults, keys
from longstep.messages import transcript_sha256
from longstep.store import CheckpointStore
from longstep.subagents import child_run_id
from longstep.transcript import transcript
from longstep_kit.local.faults import Fault
from longstep_kit.local.runner import RunOptions, run_scenario
from longstep_kit.local.stack import LocalStack

from tests.local.conftest import delegate_context

RUN = "delegate"
CHILDREN = ("t0c0", "t0c1")  # the lead's two delegated calls of turn 0
MODEL_POINTS = (faults.BEFORE_MODEL, faults.AFTER_MODEL, faults.AFTER_RECORD)
TOOL_POINTS = (faults.BEFORE_TOOL, faults.AFTER_EFFECT, faults.AFTER_TOOL)
# Every run of the tree has two turns (0: tool calls, 1: the answer); tools run in turn 0 only.
# In the lead, turn 0's tool calls are the delegated ones: CallTool records the children's answers.
STEP_POINTS = [(p, t) for t in (0, 1) for p in MODEL_POINTS] + [(p, 0) for p in TOOL_POINTS]
PLACES = [(RUN, p, t) for p, t in STEP_POINTS] + [(RUN, faults.CHILD_STARTED, 0)] + [(c, p, t) for c in CHILDREN for p, t in STEP_POINTS]
_names = itertools.count()


@pytest.fixture(scope="module")
def stack():
    with LocalStack(context=delegate_context()) as local:
        yield local


def _run(stack, delegate, **options):
    stack.reset_data()
    name = f"crash-{next(_names)}"
    report = run_scenario(stack, delegate, RunOptions(run_id=RUN, execution_name=name, **options))
    return name, report


def _tree(stack, name: str) -> dict[str, object]:
    """The child executions started under ``name``, and each child run's transcript hash."""
    sfn = stack.client("stepfunctions")
    listed = sfn.list_executions(stateMachineArn=stack.state_machine_arn, maxResults=1000)["executions"]
    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
    hashes = {}
    for call in range(len(CHILDREN)):
        child = child_run_id(RUN, 0, call)
        run = store.get(child, keys.RUN_RECORD)
        hashes[child] = transcript_sha256(transcript({"goal": run["goal"]}, store.steps(child)))
    return {"executions": sorted(e["name"] for e in listed if e["name"].startswith(f"{name}-t")), "transcripts": hashes}


@pytest.fixture(scope="module")
def clean(stack, delegate):
    name, report = _run(stack, delegate)
    assert report["status"] == "SUCCEEDED", report.get("cause")
    return report, _tree(stack, name)


def _assert_clean(stack, name, report, clean):
    clean_report, clean_tree = clean
    assert report["status"] == "SUCCEEDED", report.get("cause")
    assert report["output"] == clean_report["output"]
    assert report["transcript_sha256"] == clean_report["transcript_sha256"]
    assert report["effects"]["duplicate_effects"] == 0
    tree = _tree(stack, name)
    assert tree["executions"] == [f"{name}-{c}" for c in CHILDREN]  # no second child, none lost
    assert tree["transcripts"] == clean_tree["transcripts"]


def test_the_clean_tree_has_two_children_with_transcripts_of_their_own(clean):
    report, tree = clean
    assert report["transcript_sha256"].startswith("b5904915")  # the baseline: the children's answers are in it
    assert len(set(tree["transcripts"].values())) == 2


# In the suite: every point in the lead, and in one child the points of its tool turn and of its
# answer's model step; every point of both children in `make campaign`.
_REPRESENTATIVE = {(RUN, p, t) for p, t in STEP_POINTS} | {(RUN, faults.CHILD_STARTED, 0)}
_REPRESENTATIVE |= {(CHILDREN[0], p, 0) for p in TOOL_POINTS} | {(CHILDREN[1], faults.AFTER_MODEL, 1)}


@pytest.mark.parametrize(("run", "point", "turn"), campaign(PLACES, _REPRESENTATIVE.__contains__), ids=[f"{r}-{p}@{t}" for r, p, t in PLACES])
def test_a_crash_at_any_step_of_the_parent_or_a_child(stack, delegate, clean, run, point, turn):
    name, report = _run(stack, delegate, faults=[Fault(point, turn, run)])
    _assert_clean(stack, name, report, clean)
    target = RUN if run == RUN else f"{RUN}-{run}"
    assert [(f["point"], f["turn"], f["run"]) for f in report["faults_injected"]] == [(point, turn, target)]


@pytest.mark.parametrize("turn", [0, 1])
def test_a_restart_of_the_parent(stack, delegate, clean, turn):
    # --restart-at stops the parent's execution when a run of the tree starts turn N's model call:
    # turn 0 is the lead's own first turn; turn 1 is reached first by a child (the lead waits
    # for both), so the parent is stopped while its children run. The new execution re-parks the
    # delegated calls on the same children, which answer it.
    name, report = _run(stack, delegate, restart_at=turn)
    _assert_clean(stack, name, report, clean)
    assert report["restarts"] == 1 and report["executions"] == 2
    (restart,) = report["faults_injected"]
    assert restart["point"] == "restart"
    assert (restart["run"] == RUN) == (turn == 0)
