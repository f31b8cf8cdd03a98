"""The fault kinds beyond a crash (local/fault_kinds.py), on triage.json: a zombie invocation, a
lost acknowledgement, clock skew between handlers. Each must give the clean run's transcript and
effects (counted from the agent's own ledgers: duplicate_effects 0), and each must really fire.
"""

from __future__ import annotations

import itertools

import pytest

from longstep_kit.local.faults import parse_fault
from longstep_kit.local.runner import RunOptions, run_scenario
from tests.conftest import campaign

from .test_crash_campaign import _assert_same_run

_names = itertools.count()
# Turn 1 is a model step with two reads, turn 2 files a ticket (keyed), turn 5 sends an email (at
# most once, approved): each kind of step a zombie can stall in (every point: make campaign).
ZOMBIES = ["zombie.after_model@1", "zombie.after_record@1", "zombie.after_effect@2", "zombie.before_tool@5", "zombie.after_effect@5"]
OTHERS = [
    "lost_ack.PutItem@0",
    "lost_ack.PutItem@4",  # turn 0: one call, nothing in parallel, so the index is the same write every run
    "lost_ack.UpdateItem@0:tickets",  # update_ticket's own update: it logged the update twice before its guard
    "lost_ack.PutObject@0",
    "lost_ack.SendTaskSuccess@0",  # the approval's: the table said expired though the email went out
    "lost_ack.UpdateItem@1:approval",  # the decision's own update: its retry read it as another approver's, and nothing resumed the call
    "skew.model_turn@-3600",
    "skew.call_tool@86400",
]


def _run(stack, triage, *specs):
    stack.reset_data()
    plan = [parse_fault(spec) for spec in specs]
    return run_scenario(stack, triage, RunOptions(run_id="triage", execution_name=f"kinds-{next(_names)}", faults=plan, timeout_seconds=120))


@pytest.fixture(scope="module")
def clean(stack, triage):
    report = _run(stack, triage)
    assert report["status"] == "SUCCEEDED" and report["effects"]["duplicate_effects"] == 0
    return report


def _records(stack) -> list[dict]:
    return stack.client("dynamodb").scan(TableName=stack.outputs["CheckpointTableName"], ConsistentRead=True)["Items"]


# The suite keeps a representative of each kind (a zombie after an effect; lost acknowledgements of a
# step's put, a tool's update and a decision's update; a skewed tool clock); `make campaign` runs all.
@pytest.mark.parametrize("spec", campaign(ZOMBIES, "zombie.after_effect@2".__eq__))
def test_a_zombie_neither_acts_twice_nor_overwrites_the_winner(stack, triage, clean, spec):
    report = _run(stack, triage, spec)
    _assert_same_run(report, clean)
    point, turn = spec.split("@")
    fired = [f for f in report["faults_injected"] if f["point"] == point]
    assert [(f["turn"], f["takeover"]) for f in fired] == [(int(turn), "completed")]  # it stalled, another attempt won
    # The zombie's model reply is marked: had its late write replaced the winner's, it would be here.
    assert not [item for item in _records(stack) if "zombie_write" in str(item)]
    assert report["escalations"] == []


@pytest.mark.parametrize(
    "spec",
    campaign(OTHERS, {"lost_ack.PutItem@0", "lost_ack.UpdateItem@0:tickets", "lost_ack.UpdateItem@1:approval", "skew.call_tool@86400"}.__contains__),
)
def test_a_lost_acknowledgement_or_a_skewed_clock_gives_the_same_run(stack, triage, clean, spec):
    report = _run(stack, triage, spec)
    _assert_same_run(report, clean)
    what, number = spec.split("@")
    assert [(f["point"], f["turn"]) for f in report["faults_injected"]] == [(what, int(number.partition(":")[0]))]
    assert report["escalations"] == []
    # The approvals table says what reached the run (a lost SendTaskSuccess's retry hears
    # TaskTimedOut: the request was left marked expired though its email went out).
    assert [a["status"] for a in report["approvals"]] == [a["status"] for a in clean["approvals"]]


def test_kinds_mix_with_crashes(stack, triage, clean):
    report = _run(stack, triage, "zombie.after_effect@2", "lost_ack.UpdateItem@1:tickets", "after_model@3", "skew.call_tool@-120")
    _assert_same_run(report, clean)
    assert {f["point"] for f in report["faults_injected"]} == {"zombie.after_effect", "lost_ack.UpdateItem", "after_model", "skew.call_tool"}


def test_a_lost_acknowledgement_of_the_step_claim_costs_one_retry(stack, triage, clean):
    # The step's record is its own lock (longstep.claims): the first PutItem on the checkpoint table
    # is Init's run record, the next ones claim steps. The SDK's retry of a claim whose response was
    # lost finds the claim taken by its own attempt and carries on (with the Powertools lock this
    # escalated: the lock's wall-clock deadline never passed on the virtual clock).
    report = _run(stack, triage, "lost_ack.PutItem@1:Checkpoint", "lost_ack.PutItem@2:Checkpoint")
    assert report["faults_unfired"] == []  # both responses were lost
    _assert_same_run(report, clean)


def test_a_planned_fault_that_never_fired_is_reported_in_one_line(stack, triage, clean, capsys):
    from longstep_kit.cli.run_summary import print_summary

    report = _run(stack, triage, "before_tool@8", "after_model@2")  # turn 8 answers: it calls no tool
    _assert_same_run(report, clean)
    assert report["faults_unfired"] == ["before_tool@8"]
    print_summary(report)
    lines = [line for line in capsys.readouterr().out.splitlines() if "never fired" in line]
    assert lines == ["  faults that never fired (1, their step never ran): before_tool@8"]


@pytest.mark.parametrize("skew", campaign(["skew.model_turn@3600", "skew.model_turn@-86400", "before_model@0"], "skew.model_turn@-86400".__eq__))
def test_a_skewed_model_turn_does_not_move_a_timer(stack, skew):
    # A wait_for timer ends where the state machine's clock says the turn began (its
    # $$.State.EnteredTime, recorded with the reply), not where the turn's handler reads its own
    # clock: a model turn an hour ahead ended the two-day timer an hour late (the transcript's
    # "until" differed).
    from longstep_kit.local.scenario import load_scenario

    from .conftest import SCENARIOS

    # A crash's retry (before_model@0) starts the run's later turns at a fraction of a second:
    # the local Wait state rounded its seconds down and woke before the timer's end, so the next
    # turn's timer ended a second early. A Wait ends at its timestamp or after it.
    timer = load_scenario(SCENARIOS / "wait_for_timer.json")
    clean = _run(stack, timer)
    skewed = _run(stack, timer, skew)
    assert [f["point"] for f in skewed["faults_injected"]][:1] == [skew.split("@")[0]]
    assert skewed["status"] == clean["status"] == "SUCCEEDED"
    assert skewed["transcript_sha256"] == clean["transcript_sha256"]
