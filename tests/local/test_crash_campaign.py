"""The crash campaign: a crash at every fault point of every turn of triage.json costs one step,
never the run, never a second side effect; and a restart at every turn replays the same run.

Each case runs on a wiped world with the same run id, so its transcript can equal the clean one.
"""

from __future__ import annotations

import itertools
import json

import pytest

from longstep_kit.local.faults import Fault
from longstep_kit.local.runner import RunOptions, run_scenario
from longstep import faults
from tests.conftest import campaign
from tests.local.conftest import SCENARIOS

TURNS = 9  # triage.json has turns 0..8
MODEL_BILLED = {faults.BEFORE_MODEL, faults.AFTER_MODEL}
MODEL_POINTS = (faults.BEFORE_MODEL, faults.AFTER_MODEL, faults.AFTER_RECORD)
# Every turn has a model step; the tool points exist on the turns whose reply calls a tool (not the
# final answer's): every (point, turn) the run really has, each asserted to fire below.
_TOOL_TURNS = [int(t) for t, turn in json.loads((SCENARIOS / "triage.json").read_text())["turns"].items() if turn.get("tool_calls")]
CASES = [(p, t) for t in range(TURNS) for p in faults.POINTS if p in MODEL_POINTS or t in _TOOL_TURNS]
_names = itertools.count()


def _run(stack, triage, **options):
    stack.reset_data()
    return run_scenario(stack, triage, RunOptions(run_id="triage", execution_name=f"campaign-{next(_names)}", **options))


@pytest.fixture(scope="module")
def clean(stack, triage):
    report = _run(stack, triage)
    assert report["status"] == "SUCCEEDED" and report["effects"]["duplicate_effects"] == 0
    assert len(triage.turns) == TURNS
    return report


def _assert_same_run(report, clean):
    assert report["status"] == "SUCCEEDED", report.get("cause")
    assert report["output"] == clean["output"]
    assert report["transcript_sha256"] == clean["transcript_sha256"]
    assert report["effects"] == clean["effects"]  # the same effects per tool's ledger, duplicate_effects 0


def test_the_campaign_has_every_point_of_every_turn_that_has_it():
    assert set(MODEL_POINTS) | {faults.BEFORE_TOOL, faults.AFTER_EFFECT, faults.AFTER_TOOL} == set(faults.POINTS)
    assert _TOOL_TURNS == list(range(TURNS - 1))  # turns 0..7 call tools; turn 8 answers
    assert len(CASES) == 3 * TURNS + 3 * (TURNS - 1)


# In the suite: every point at turn 3 (two parallel tool calls) and at turn 5 (an approved email:
# its probe answers a crash after the effect), and the final answer's; every turn in `make campaign`.
REPRESENTATIVE_TURNS = (3, 5, 8)


@pytest.mark.parametrize(("point", "turn"), campaign(CASES, lambda case: case[1] in REPRESENTATIVE_TURNS))
def test_a_crash_at_any_point_costs_one_step(stack, triage, clean, point, turn):
    report = _run(stack, triage, faults=[Fault(point, turn)])
    _assert_same_run(report, clean)
    fired = [f for f in report["faults_injected"] if f["point"] == point]
    assert [(f["point"], f["turn"]) for f in fired] == [(point, turn)]  # the crash really happened, once
    model_faults = sum(1 for f in fired if f["point"] in MODEL_BILLED)
    assert report["model_calls"]["executed"] <= clean["model_calls"]["executed"] + model_faults
    # A crash right after an email went out leaves its outcome unknown: send_email's probe finds
    # it in the outbox, so no human is asked and it is not sent again (the ledger would count it).
    assert report["escalations"] == []


def test_faults_really_fire_where_the_turn_has_that_step(stack, triage, clean):
    report = _run(stack, triage, faults=[Fault(faults.AFTER_EFFECT, 2), Fault(faults.AFTER_MODEL, 3)])
    _assert_same_run(report, clean)
    assert [(f["point"], f["turn"]) for f in report["faults_injected"]] == [("after_effect", 2), ("after_model", 3)]
    assert report["model_calls"]["executed"] == clean["model_calls"]["executed"] + 1
    assert report["tool_calls"]["executed"] == clean["tool_calls"]["executed"] + 1  # the keyed filing ran twice...
    assert report["effects"]["by_tool"]["file_ticket"] == clean["effects"]["by_tool"]["file_ticket"]  # ...and filed once


@pytest.mark.parametrize("turn", campaign(list(range(TURNS)), lambda turn: turn in (0, 4, 8)))
def test_restart_at_any_turn_gives_the_clean_transcript(stack, triage, clean, turn):
    report = _run(stack, triage, restart_at=turn)
    _assert_same_run(report, clean)
    assert report["restarts"] == 1
    assert report["executions"] == 2  # it really stopped, and a new execution resumed the run
    assert report["model_calls"]["executed"] == clean["model_calls"]["executed"]
