"""The release workflow scenario on the local stack: it succeeds, runs nothing while its child
agent run works or while it sleeps two days, and a crash at any fault point of any step (the
workflow's and its child agent's) replays to the clean run's log and transcript with no
duplicate effect."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from longstep import faults
from longstep.humans.escalations import Resolution
from longstep_kit.local.faults import Fault
from longstep_kit.local.scenario import ScenarioSignal
from longstep_kit.local.runner import RunOptions
from longstep_kit.local.stack import LocalStack
from longstep_kit.local.workflow_run import run_workflow_scenario, stack_context

from tests.local.conftest import release_ledger

TWO_DAYS = 2 * 86_400
# Positions of the release workflow's calls (agents/release.py): 1 now(), 2 build, 3 the triage
# agent, 4 approval, 5 publish, 6 sleep, 7 follow_up.
STEPS = {"build_artifact": 2, "publish": 5, "follow_up": 7}
AGENT_POSITION = 3
STEP_POINTS = (faults.BEFORE_TOOL, faults.AFTER_EFFECT, faults.AFTER_TOOL)
# Every fault point the run reaches: each workflow step's, the Delegate's start of the child, and
# the child agent run's (turn 0: a model call and a keyed ticket filing; turn 1: its final answer).
CHILD_POINTS = [Fault(p, 0) for p in faults.POINTS] + [Fault(p, 1) for p in (faults.BEFORE_MODEL, faults.AFTER_MODEL, faults.AFTER_RECORD)]
CAMPAIGN = sorted(
    [Fault(p, seq) for seq in STEPS.values() for p in STEP_POINTS] + [Fault(faults.CHILD_STARTED, AGENT_POSITION)] + CHILD_POINTS,
    key=lambda f: (f.point, f.turn),
)
# At most once: a crash after the publish happened leaves its outcome unknown (tested apart).
OUTCOME_UNKNOWN = Fault(faults.AFTER_EFFECT, STEPS["publish"])
WORKFLOW_HANDLER = "longstep_functions.workflow.lambda_handler"


@pytest.fixture(scope="module")
def stack(release):
    with LocalStack(context=stack_context(release)) as local:
        yield local


def run(stack: LocalStack, release, name: str, **options) -> dict:
    """Run the scenario's run id afresh (its data reset) under the execution name ``name``:
    execution names stay taken, and the child's run id (so its tickets' ids) comes from the run id."""
    stack.reset_data()
    return run_workflow_scenario(stack, release, RunOptions(execution_name=name, timeout_seconds=120, **options))


@pytest.fixture(scope="module")
def clean(stack, release):
    first = len(stack.dispatcher.invocations)
    report = run(stack, release, "release-clean")
    report["ledger"] = release_ledger(stack)
    report["approval_items"] = stack.client("dynamodb").scan(TableName=stack.outputs["ApprovalsTableName"])["Items"]
    report["child_window"] = child_window(stack.dispatcher.invocations[first:])
    return report


def child_window(invocations: list) -> dict:
    """What ran between the Delegate's park and the workflow's next pass: the workflow's function
    and the child run's functions."""
    workflow = [i for i, inv in enumerate(invocations) if inv.handler == WORKFLOW_HANDLER]
    parked = next(i for i in workflow if (invocations[i].event.get("state") or {}).get("directive", {}).get("next") == "delegate")
    resumed = next(i for i in workflow if i > parked)
    between = invocations[parked + 1 : resumed]
    return {
        "workflow_invocations": sum(1 for inv in between if inv.handler == WORKFLOW_HANDLER),
        "child_invocations": sum(1 for inv in between if inv.handler != WORKFLOW_HANDLER),
    }


def test_the_release_scenario_succeeds(clean, release):
    assert clean["status"] == "SUCCEEDED", clean
    text = json.dumps(clean["output"])
    assert all(expected in text for expected in release.expect.output_contains)
    assert [s["kind"] for s in clean["steps"]] == ["now", "step", "agent", "approval", "step", "sleep", "step"]
    assert clean["steps_executed"] == 3 and clean["effects_executed"] == 4  # three steps, the child's ticket
    assert clean["ledger"] == Counter(build=1, publish=1, followup=1)
    (child,) = clean["children"]
    assert (child["position"], child["agent"], child["run_id"], child["status"]) == (
        AGENT_POSITION,
        "triage",
        "release-billing-2-4-0-s3",
        "succeeded",
    )
    assert child["effects"]["by_tool"]["file_ticket"] == 1
    assert clean["duplicate_effects"] == 0


def test_runs_start_on_the_alias_and_keep_its_version(stack, clean):
    # Pinned like an agent's runs: the alias ``live`` routes to this deploy's version.
    (version,) = set(clean["versions"])
    arn = stack.outputs["WorkflowStateMachineArnRelease"]
    assert version.startswith(f"{arn}:") and version != f"{arn}:live"
    (alias,) = stack.client("stepfunctions").list_state_machine_aliases(stateMachineArn=arn)["stateMachineAliases"]
    described = stack.client("stepfunctions").describe_state_machine_alias(stateMachineAliasArn=alias["stateMachineAliasArn"])
    assert described["routingConfiguration"] == [{"stateMachineVersionArn": version, "weight": 100}]


def test_the_approver_sees_the_triage_agents_verdict(clean):
    (request,) = clean["approval_items"]
    assert "Verdict: does not block the release" in json.dumps(request), request


def test_while_the_child_runs_and_while_sleeping_two_days_the_workflow_runs_nothing(clean):
    (sleep,) = clean["waits"]
    assert sleep["seconds"] == TWO_DAYS
    assert sleep["lambda_invocations_during"] == 0
    assert sleep["history_events_during"] == 0
    assert clean["virtual_seconds"] >= TWO_DAYS
    # Passes: build (then the delegate directive), the agent's record (then the approval), publish
    # (then the sleep), the follow-up; parks: the Delegate and the approval. None while the child runs.
    assert clean["lambda_invocations"] == 6
    assert clean["child_window"]["workflow_invocations"] == 0 and clean["child_window"]["child_invocations"] >= 4


def test_a_rejected_release_is_not_published(stack, release):
    report = run(stack, release, "release-rejected", approve="reject")
    assert report["status"] == "SUCCEEDED"
    assert report["output"]["status"] == "not released"
    assert release_ledger(stack) == Counter(build=1)


def test_the_campaign_covers_every_fault_point_the_run_offers(clean):
    assert sorted(tuple(pair) for pair in clean["faults_offered"]) == sorted((f.point, f.turn) for f in CAMPAIGN)


@pytest.mark.parametrize("fault", [f for f in CAMPAIGN if f != OUTCOME_UNKNOWN], ids=lambda f: f"{f.point}@{f.turn}")
def test_a_crash_at_any_point_of_any_step_ends_with_the_clean_log_and_no_duplicate_effect(stack, release, clean, fault):
    report = run(stack, release, f"release-{fault.point}-{fault.turn}".replace("_", "-"), faults=[fault])
    assert [(f["point"], f["turn"]) for f in report["faults_injected"]] == [(fault.point, fault.turn)]
    assert report["status"] == "SUCCEEDED", report
    assert report["log_sha256"] == clean["log_sha256"]
    assert [c["transcript_sha256"] for c in report["children"]] == [c["transcript_sha256"] for c in clean["children"]]
    assert report["duplicate_effects"] == 0 and report["children"][0]["effects"]["by_tool"]["file_ticket"] == 1
    assert release_ledger(stack) == Counter(build=1, publish=1, followup=1)  # a keyed build re-run overwrites its own entry
    if fault.point == faults.AFTER_TOOL and fault.turn in STEPS.values():  # recorded before the crash: replayed, never re-run
        assert report["effects_executed"] == 4


def test_a_crash_after_the_publish_asks_a_human_instead_of_publishing_twice(stack, release):
    # Nobody says what happened (a retry, then an abort): the run fails, published once.
    report = run(stack, release, "release-publish-unknown", faults=[OUTCOME_UNKNOWN])
    assert report["status"] == "FAILED" and report["error"] == "EscalationAborted"
    assert release_ledger(stack)["publish"] == 1


@pytest.mark.parametrize("position", [STEPS["build_artifact"], 0, STEPS["follow_up"]])
def test_a_restart_of_the_run_re_attaches_to_its_child_and_ends_with_the_clean_log(stack, release, clean, position):
    # Restarted before the build, while the child runs (its ticket filing starts), before the follow-up.
    report = run(stack, release, f"release-restart-{position}", restart_at=position)
    assert report["status"] == "SUCCEEDED", report
    assert report["restarts"] == 1 and report["executions"] == 2
    assert report["log_sha256"] == clean["log_sha256"]
    assert [c["transcript_sha256"] for c in report["children"]] == [c["transcript_sha256"] for c in clean["children"]]
    assert report["duplicate_effects"] == 0
    assert release_ledger(stack) == Counter(build=1, publish=1, followup=1)


def test_a_human_who_confirms_the_publish_lets_the_run_finish_with_the_clean_log(stack, release, clean):
    answered = release.model_copy(
        update={"escalations": {"publish": Resolution(action="skip", result={"published": "billing-2.4.0.tar.gz"}, happened=True)}}
    )
    report = run(stack, answered, "release-confirmed", faults=[OUTCOME_UNKNOWN])
    assert report["status"] == "SUCCEEDED", report
    assert report["log_sha256"] == clean["log_sha256"]
    assert release_ledger(stack) == Counter(build=1, publish=1, followup=1)


def test_a_run_handed_over_to_new_executions_ends_with_the_same_log(stack, release, clean):
    handed = release.model_copy(update={"passes_per_execution": 1})
    report = run(stack, handed, "release-handed-over")
    assert report["status"] == "SUCCEEDED", report
    # The first execution builds and waits for the child agent run; its next directive (the
    # approval) goes to a second execution, which waits for it and publishes; the sleep goes to a
    # third, which sleeps and follows up. The child's outcome, recorded by the first, is replayed.
    assert report["executions"] == 3
    # Each hand-over starts the next execution on the version the run runs: pinned throughout.
    assert len(set(report["versions"])) == 1 and report["versions"][0].rsplit(":", 1)[1].isdigit()
    assert [c["transcript_sha256"] for c in report["children"]] == [c["transcript_sha256"] for c in clean["children"]]
    assert report["log_sha256"] == clean["log_sha256"]
    assert release_ledger(stack) == Counter(build=1, publish=1, followup=1)


@pytest.mark.parametrize("payload, status", [({"version": "2.4.0", "ok": True}, "released"), (None, "published, rollback advised")])
def test_a_signal_reaches_the_waiting_workflow_or_its_wait_times_out(stack, release, payload, status):
    signals = [ScenarioSignal(event="smoke-tests", payload=payload, at="waiting")] if payload else []
    smoke = release.model_copy(update={"input": {**release.input, "smoke_tests": True}, "signals": signals})
    report = run(stack, smoke, f"release-smoke-{bool(payload)}".lower())
    assert report["status"] == "SUCCEEDED", report
    assert report["output"]["status"] == status
    kinds = [s["kind"] for s in report["steps"]]
    assert kinds[:6] == ["now", "step", "agent", "approval", "step", "event"]
    if payload is None:  # the hour passed on the virtual clock, with nothing running meanwhile
        assert report["virtual_seconds"] >= 3600 and len(kinds) == 6
