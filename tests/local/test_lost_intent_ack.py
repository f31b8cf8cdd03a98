"""A lost acknowledgement of an at-most-once step's intent marker: the marker's put took effect,
its response was lost and the SDK sent it again; the retry's conditional put is refused by the
attempt's own marker. The step is still the attempt's own and runs once (it escalated as
"started before and its result was never recorded", and a human had to abort a run whose publish
never ran: seen in `make campaign`'s release lost_ack.PutItem@20:checkpoint)."""

from __future__ import annotations

from bench.faults.campaign import SCENARIOS, _stack_context
from longstep_kit.local.faults import parse_fault
from longstep_kit.local.runner import RunOptions
from longstep_kit.local.stack import LocalStack
from longstep_kit.local.workflow_run import load_workflow_scenario, run_workflow_scenario


def test_a_lost_response_to_the_intent_markers_put_leaves_the_step_its_own():
    scenario = load_workflow_scenario(SCENARIOS / "release.json")
    with LocalStack(context=_stack_context("release")) as stack:
        clean = run_workflow_scenario(stack, scenario, RunOptions(execution_name="clean", timeout_seconds=180))
        stack.reset_data()
        # The 21st checkpoint put of the release run is the publish step's intent marker.
        fault = parse_fault("lost_ack.PutItem@20:checkpoint")
        report = run_workflow_scenario(stack, scenario, RunOptions(execution_name="lost", faults=[fault], timeout_seconds=180))
    assert report["faults_injected"] and report["status"] == clean["status"] == "SUCCEEDED", report.get("cause")
    assert report["log_sha256"] == clean["log_sha256"] and report["duplicate_effects"] == 0
