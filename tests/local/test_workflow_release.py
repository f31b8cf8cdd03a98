"""The release workflow scenario on the local stack: it succeeds, sleeps two days running nothing,
and a crash at any fault point of any step replays without running a done effect again."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from longstep import faults
from longstep.humans.escalations import Resolution
from longstep_kit.local.faults import Fault
from longstep_kit.local.scenario import ScenarioSignal
from longstep_kit.local.runner import RunOptions
from longstep_kit.local.stack import LocalStack
from longstep_kit.local.workflow_run import load_workflow_scenario, run_workflow_scenario, stack_context, workflow_tables

SCENARIO = Path(__file__).resolve().parents[2] / "events" / "scenarios" / "release.json"
TWO_DAYS = 2 * 86_400
# Positions of the release workflow's steps (agents/release.py): 1 now(), 2 build, 3 approval,
# 4 publish, 5 sleep, 6 follow_up.
STEPS = {"build_artifact": 2, "publish": 4, "follow_up": 6}
STEP_POINTS = (faults.BEFORE_TOOL, faults.AFTER_EFFECT, faults.AFTER_TOOL)


@pytest.fixture(scope="module")
def release():
    return load_workflow_scenario(SCENARIO)


@pytest.fixture(scope="module")
def stack(release):
    with LocalStack(context=stack_context(release)) as local:
        yield local


def ledger(stack: LocalStack) -> Counter:
    table = workflow_tables(stack, "release")["release_ledger"]
    items = stack.client("dynamodb").scan(TableName=table)["Items"]
    return Counter(item["kind"]["S"] for item in items)


def run(stack: LocalStack, release, run_id: str, **options) -> dict:
    stack.reset_data()  # a fresh ledger (execution names stay taken: each run has its own id)
    return run_workflow_scenario(stack, release, RunOptions(run_id=run_id, timeout_seconds=120, **options))


@pytest.fixture(scope="module")
def clean(stack, release):
    report = run(stack, release, "release-clean")
    report["ledger"] = ledger(stack)
    return report


def test_the_release_scenario_succeeds(clean, release):
    assert clean["status"] == "SUCCEEDED", clean
    text = json.dumps(clean["output"])
    assert all(expected in text for expected in release.expect.output_contains)
    assert [s["kind"] for s in clean["steps"]] == ["now", "step", "approval", "step", "sleep", "step"]
    assert clean["steps_executed"] == 3 and clean["effects_executed"] == 3
    assert clean["ledger"] == Counter(build=1, publish=1, followup=1)


def test_while_sleeping_two_days_nothing_runs(clean):
    (sleep,) = clean["waits"]
    assert sleep["seconds"] == TWO_DAYS
    assert sleep["lambda_invocations_during"] == 0
    assert sleep["history_events_during"] == 0
    assert clean["virtual_seconds"] >= TWO_DAYS
    # every invocation: 3 passes that each ran a step or waited, the approval's park
    assert clean["lambda_invocations"] == 4


def test_a_rejected_release_is_not_published(stack, release):
    report = run(stack, release, "release-rejected", approve="reject")
    assert report["status"] == "SUCCEEDED"
    assert report["output"]["status"] == "not released"
    assert ledger(stack) == Counter(build=1)


@pytest.mark.parametrize("point", STEP_POINTS)
@pytest.mark.parametrize("step", sorted(STEPS))
def test_a_crash_at_any_point_of_any_step_runs_no_done_effect_again(stack, release, clean, step, point):
    report = run(stack, release, f"release-{step}-{point}".replace("_", "-"), faults=[Fault(point, STEPS[step])])
    assert [f["point"] for f in report["faults_injected"]] == [point]
    effects = ledger(stack)
    assert effects["publish"] <= 1 and effects["build"] == 1, effects  # a keyed build re-run overwrites its own entry
    if step == "publish" and point == faults.AFTER_EFFECT:
        # At most once: the publish may have happened and cannot be deduplicated; the run asks a
        # human instead of publishing twice. Nobody says what happened (a retry, then an abort).
        assert report["status"] == "FAILED" and report["error"] == "EscalationAborted"
        assert effects["publish"] == 1
        return
    assert report["status"] == "SUCCEEDED", report
    assert report["log_sha256"] == clean["log_sha256"]
    assert effects == Counter(build=1, publish=1, followup=1)
    if point == faults.AFTER_TOOL:  # the effect was recorded before the crash: replayed, never re-run
        assert report["effects_executed"] == 3


def test_a_human_who_confirms_the_publish_lets_the_run_finish_with_the_clean_log(stack, release, clean):
    answered = release.model_copy(
        update={"escalations": {"publish": Resolution(action="skip", result={"published": "billing-2.4.0.tar.gz"}, happened=True)}}
    )
    report = run(stack, answered, "release-confirmed", faults=[Fault(faults.AFTER_EFFECT, STEPS["publish"])])
    assert report["status"] == "SUCCEEDED", report
    assert report["log_sha256"] == clean["log_sha256"]
    assert ledger(stack) == Counter(build=1, publish=1, followup=1)


def test_a_run_handed_over_to_new_executions_ends_with_the_same_log(stack, release, clean):
    handed = release.model_copy(update={"passes_per_execution": 1})
    report = run(stack, handed, "release-handed-over")
    assert report["status"] == "SUCCEEDED", report
    # The first execution builds, waits for the approval and publishes; its next directive (the
    # sleep) is handed to a second execution, which sleeps and follows up.
    assert report["executions"] == 2
    assert report["log_sha256"] == clean["log_sha256"]
    assert ledger(stack) == Counter(build=1, publish=1, followup=1)


@pytest.mark.parametrize("payload, status", [({"version": "2.4.0", "ok": True}, "released"), (None, "published, rollback advised")])
def test_a_signal_reaches_the_waiting_workflow_or_its_wait_times_out(stack, release, payload, status):
    signals = [ScenarioSignal(event="smoke-tests", payload=payload, at="waiting")] if payload else []
    smoke = release.model_copy(update={"input": {**release.input, "smoke_tests": True}, "signals": signals})
    report = run(stack, smoke, f"release-smoke-{bool(payload)}".lower())
    assert report["status"] == "SUCCEEDED", report
    assert report["output"]["status"] == status
    kinds = [s["kind"] for s in report["steps"]]
    assert kinds[:5] == ["now", "step", "approval", "step", "event"]
    if payload is None:  # the hour passed on the virtual clock, with nothing running meanwhile
        assert report["virtual_seconds"] >= 3600 and len(kinds) == 5
