"""``longstep local campaign``: the scenario clean and under faults, each run compared with the clean
one; a passing campaign exits 0, a tool declared keyed that does not deduplicate is caught by the
crash after its effect, named, and exits 1; bad flags are refused before the deploy."""

from __future__ import annotations

import json

import pytest

from longstep_kit import cli
from longstep_kit.local.campaign import CampaignPlan
from longstep_kit.local.scenario import load_scenario
from longstep import faults
from tests.local.conftest import REPO_ROOT, SCENARIOS

UNKEYED = REPO_ROOT / "tests" / "fixtures" / "unkeyed.json"


def test_the_plan_crashes_every_point_of_every_turn_that_has_it():
    triage = load_scenario(SCENARIOS / "triage.json")
    cases = [c.label for c in CampaignPlan().cases(triage)]
    tool_turns = [t for t, turn in triage.turns.items() if turn.tool_calls]
    model_points = {faults.BEFORE_MODEL, faults.AFTER_MODEL, faults.AFTER_RECORD}
    crashes = [f"{p}@{t}" for t in range(len(triage.turns)) for p in faults.POINTS if p in model_points or t in tool_turns]
    restarts = [f"restart at {t}" for t in range(1, len(triage.turns))]
    assert cases == crashes + ["random seed 1", "random seed 2", "random seed 3"] + restarts


def test_a_campaign_on_triage_passes_and_says_so(capsys, tmp_path):
    # A representative slice (`make campaign` and bench/faults run the whole of it): after the
    # effect at the approved email's turn, where the probe answers; a random seed; a restart.
    out = tmp_path / "campaign.json"
    argv = ["local", "campaign", str(SCENARIOS / "triage.json"), "--points", "after_effect", "--turns", "5", "--seeds", "2", "--json", str(out)]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "after_effect@5" in printed and "restart at 5" in printed and "random seed 2" in printed
    assert printed.strip().splitlines()[-1].startswith("campaign triage: PASS: 4 runs (1 clean), 3 with faults that fired, 0 differ")
    result = json.loads(out.read_text())
    assert result["passed"] is True and result["duplicates"] == 0
    assert [r["case"] for r in result["rows"]] == ["clean", "after_effect@5", "random seed 2", "restart at 5"]
    assert all(r["same_run"] and r["fired"] for r in result["rows"])


def test_a_keyed_tool_that_does_not_deduplicate_fails_the_campaign_by_name(capsys, tmp_path):
    out = tmp_path / "campaign.json"
    argv = ["local", "campaign", str(UNKEYED), "--points", "after_effect,after_tool", "--no-random", "--no-restarts", "--json", str(out)]
    assert cli.main(argv) == 1
    printed = capsys.readouterr().out
    # Clean, it pays once; a crash after the payment runs the call again, and the ledger counts two.
    assert "duplicate: after_effect@0: pay_once ran 2 times for one call (unkeyed:0:0)" in printed
    assert printed.strip().splitlines()[-1].startswith("campaign unkeyed: FAIL:")
    rows = {r["case"]: r for r in json.loads(out.read_text())["rows"]}
    assert rows["clean"]["duplicates"] == 0
    assert rows["after_effect@0"]["duplicates"] == 1 and not rows["after_effect@0"]["same_run"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--points", "after_lunch"], "--points: unknown point 'after_lunch'"),
        (["--turns", "42"], "--turns 42: the scenario has turns 0 to 8"),
        (["--seeds", "one"], "--seeds 'one': expected comma-separated integers"),
    ],
)
def test_bad_flags_are_refused_in_one_line_before_the_deploy(capsys, flags, message):
    try:
        code = cli.main(["local", "campaign", str(SCENARIOS / "triage.json"), *flags])
    except SystemExit as exited:  # argparse's refusal of a flag's value
        code = exited.code
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_workflow_scenario_is_refused(capsys):
    assert cli.main(["local", "campaign", str(SCENARIOS / "release.json")]) == 2
    assert "a workflow's scenario" in capsys.readouterr().err


def test_the_docs_example_runs_a_campaign_from_python():
    from examples.runs.campaign import crash_after_each_effect

    passed, duplicates, cases = crash_after_each_effect(turns=(2,))
    assert (passed, duplicates, cases) == (True, 0, ["clean", "after_effect@2"])
