"""wait_for a condition on a system that cannot push: checks with exponential backoff (Wait
states between them, nothing running), until the condition holds or the timeout passes."""

from __future__ import annotations

import itertools

from longstep_kit.local.resources import agent_tables
from longstep_kit.local.runner import RunOptions, run_scenario
from longstep_kit.local.scenario import Scenario

_names = itertools.count()


def _scenario(triage, check_every: int, timeout: int) -> Scenario:
    wait = {
        "condition": "ticket_status",
        "args": {"ticket_id": "BUG-102", "status": "closed"},
        "check_every_seconds": check_every,
        "timeout_seconds": timeout,
    }
    return Scenario.model_validate(
        {
            "name": "condition",
            "input": {"goal": "Wait until BUG-102 is closed.", "agent": "triage", "max_turns": 4},
            "world": triage.world,
            "turns": {
                "0": {"text": "Waiting for the ticket to close.", "tool_calls": [{"name": "wait_for", "input": wait}]},
                "1": {"text": "Summary: BUG-102 is closed."},
            },
        }
    )


def _checks(stack, first: int) -> list:
    return [i for i in stack.dispatcher.invocations[first:] if i.task.startswith("check_condition")]


def _tool_result(stack, run_id: str) -> dict:
    from longstep import keys
    from longstep.store import CheckpointStore

    return CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb")).get_step(run_id, keys.tool_step_key(0, 0)).result


def test_the_condition_is_checked_with_backoff_until_it_holds(stack, triage):
    stack.reset_data()
    first = len(stack.dispatcher.invocations)
    waits_before = len(stack.clock.waits)
    ddb = stack.client("dynamodb")

    def close_after_second_check(inv) -> None:  # the world changes while the run waits
        if inv.task.startswith("check_condition") and len(_checks(stack, first)) == 2:
            ddb.update_item(
                TableName=agent_tables(stack, "triage")["tickets"],
                Key={"ticket_id": {"S": "BUG-102"}},
                UpdateExpression="SET #s = :closed",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={":closed": {"S": "closed"}},
            )

    stack.dispatcher.after_invoke.append(close_after_second_check)
    try:
        report = run_scenario(
            stack, _scenario(triage, check_every=60, timeout=86_400), RunOptions(run_id="cond-met", execution_name=f"cond-{next(_names)}")
        )
    finally:
        stack.dispatcher.after_invoke.remove(close_after_second_check)
    assert report["status"] == "SUCCEEDED"
    assert len(_checks(stack, first)) == 3
    assert stack.clock.waits[waits_before:] == [60, 120]  # doubling, and no compute between checks
    outcome = _tool_result(stack, "cond-met")["content"]
    assert outcome == {
        "waited": "condition",
        "condition": "ticket_status",
        "met": True,
        "waited_seconds": 180,
        "result": {"ticket_id": "BUG-102", "status": "closed"},
    }


def test_a_condition_that_never_holds_times_out(stack, triage):
    stack.reset_data()
    first = len(stack.dispatcher.invocations)
    report = run_scenario(
        stack, _scenario(triage, check_every=600, timeout=7_200), RunOptions(run_id="cond-timeout", execution_name=f"cond-{next(_names)}")
    )
    assert report["status"] == "SUCCEEDED"  # the model is told, and goes on
    outcome = _tool_result(stack, "cond-timeout")["content"]
    assert outcome["met"] is False and outcome["timed_out"] is True and outcome["waited_seconds"] == 7_200
    assert len(_checks(stack, first)) == 5  # 600, 1200, 2400, then what is left (3000): backoff keeps checks few


def test_a_check_that_keeps_failing_ends_the_wait_and_the_model_is_told(stack, triage):
    """Without the Catch on CheckCondition the execution failed: the failure had no defined outcome."""
    stack.reset_data()

    def fail_every_check(inv) -> None:  # an error retries cannot fix (not in the transient list)
        if inv.task.startswith("check_condition"):
            inv.error = {"errorType": "ToolFailedError", "errorMessage": "the ticket system refused the check"}

    stack.dispatcher.after_invoke.append(fail_every_check)
    try:
        report = run_scenario(
            stack, _scenario(triage, check_every=60, timeout=86_400), RunOptions(run_id="cond-broken", execution_name=f"cond-{next(_names)}")
        )
    finally:
        stack.dispatcher.after_invoke.remove(fail_every_check)
    assert report["status"] == "SUCCEEDED"  # the model is told, and goes on
    result = _tool_result(stack, "cond-broken")
    assert "the condition could not be checked (ToolFailedError)" in str(result)


def test_a_condition_wait_past_its_executions_check_budget_hands_over_and_keeps_its_timeout(stack, triage):
    """A long condition wait would pass 25,000 history events: it hands the run to a fresh
    execution (like continue-as-new), and the wait goes on there, its timeout counted from its start."""
    from longstep.tasks.check_condition import ENV_CONDITION_CHECKS

    stack.reset_data()
    lam = stack.client("lambda")
    (fn,) = [f for f in lam.list_functions()["Functions"] if f["Handler"] == "longstep_functions.check_condition.lambda_handler"]
    assert int(fn["Environment"]["Variables"][ENV_CONDITION_CHECKS]) > 2  # the deployed budget

    def two_checks_per_execution(inv) -> None:  # the state machine calls a published (immutable) version
        if inv.task == "check_condition":
            inv.environment[ENV_CONDITION_CHECKS] = "2"

    stack.dispatcher.before_invoke.append(two_checks_per_execution)
    first = len(stack.dispatcher.invocations)
    try:
        report = run_scenario(
            stack, _scenario(triage, check_every=600, timeout=7_200), RunOptions(run_id="cond-handover", execution_name=f"cond-{next(_names)}")
        )
    finally:
        stack.dispatcher.before_invoke.remove(two_checks_per_execution)
    assert report["status"] == "SUCCEEDED"
    handed_over = [i for i in stack.dispatcher.invocations[first:] if i.task.startswith("continue_as_new")]
    assert handed_over  # the wait moved to a fresh execution (more than once: 2 checks each)
    outcome = _tool_result(stack, "cond-handover")["content"]
    assert outcome["timed_out"] is True and outcome["waited_seconds"] == 7_200  # not restarted by the hand-over
