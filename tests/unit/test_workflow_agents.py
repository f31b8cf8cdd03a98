"""``ctx.agent`` on the in-memory runner: the call suspends with a delegate directive, the child's
answer (or failure, or a refusal) is recorded once and replayed, and replay checks its position."""

from __future__ import annotations

import pytest

from longstep.errors import NonDeterminismError
from longstep.workflows import StepFailedError, Workflow, log
from longstep.workflows.children import child_id
from longstep.workflows.replay import child_outcome
from longstep.workflows.testing import replay_recorded, run_in_memory


def triage_flow(ctx, inp):
    built = ctx.step(lambda args, info: {"failed": ["test_a"]}, name="build")
    try:
        verdict = ctx.agent("triage", "look at the failures", failing_tests=built["failed"])["output"]
    except StepFailedError as exc:
        verdict = f"no verdict ({exc.error_type})"
    return {"verdict": verdict}


def test_the_childs_answer_is_the_calls_recorded_result_and_replays_without_asking_again():
    asked = []

    def triage(goal, inputs):
        asked.append((goal, inputs))
        return "Summary: flaky"

    run = run_in_memory(Workflow(triage_flow), run_id="wf-1", agents={"triage": triage})
    assert run.status == log.DONE and run.output == {"verdict": "Summary: flaky"}
    assert asked == [("look at the failures", {"failing_tests": ["test_a"]})]
    delegated = [d for d in run.directives if d["next"] == log.DELEGATE]
    assert delegated == [
        {
            "next": log.DELEGATE,
            "seq": 2,
            "agent": "triage",
            "goal": "look at the failures",
            "inputs": {"failing_tests": ["test_a"]},
            "steps_executed": 1,
            "passes": 1,
        }
    ]
    record = run.store.get_step("wf-1", log.step_key(2))
    assert (record.kind, record.name) == (log.AGENT, "triage")
    assert record.result["ok"]["run_id"] == "wf-1-s2"
    assert replay_recorded(Workflow(triage_flow), run.store, "wf-1") == {"verdict": "Summary: flaky"}
    assert len(asked) == 1


def test_a_failed_or_missing_agent_comes_back_as_a_step_failure_the_workflow_can_catch():
    def broken(goal, inputs):
        raise RuntimeError("the model gave up")

    failed = run_in_memory(Workflow(triage_flow), agents={"triage": broken})
    assert failed.output == {"verdict": "no verdict (SubagentFailed)"}
    refused = run_in_memory(Workflow(triage_flow), agents={})
    assert refused.output == {"verdict": "no verdict (SubagentRefused)"}


def test_moving_the_agent_call_before_the_step_raises_non_determinism_naming_both():
    run = run_in_memory(Workflow(triage_flow), run_id="wf-2", agents={"triage": lambda goal, inputs: "ok"})

    def reordered(ctx, inp):
        ctx.agent("triage", "look at the failures")
        ctx.step(lambda args, info: {"failed": []}, name="build")

    with pytest.raises(NonDeterminismError, match=r"recorded as step:build but the code now asks for agent:triage"):
        replay_recorded(Workflow(reordered), run.store, "wf-2")
    assert run.status == log.DONE


def test_outcomes_a_task_token_receives_become_recorded_outcomes():
    assert child_outcome("triage", {"run_id": "r-s2", "status": "SUCCEEDED", "output": "x", "turns": 2, "stop": "end_turn"}) == {
        "ok": {"run_id": "r-s2", "status": "SUCCEEDED", "output": "x", "turns": 2}
    }
    assert child_outcome("triage", {"timed_out": True})["failed"]["type"] == "SubagentTimedOut"
    assert child_outcome("triage", {"Error": "SubagentFailed", "Cause": "aborted"}) == {"failed": {"type": "SubagentFailed", "message": "aborted"}}


def test_child_run_ids_derive_from_the_run_and_position_and_stay_within_the_limit():
    assert child_id("release-1", 3) == "release-1-s3"
    long = child_id("r" * 80, 12)
    assert len(long) <= 80 and long.endswith("-s12") and long != child_id("r" * 79 + "x", 12)


def test_bad_agent_calls_are_one_line_errors_naming_the_field():
    def no_goal(ctx, inp):
        ctx.agent("triage", "  ")

    run = run_in_memory(Workflow(no_goal))
    assert run.status == log.FAILED and run.output == {"error": "ValueError", "cause": "goal: a non-empty string is required"}
