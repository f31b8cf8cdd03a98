"""The virtual clock the engine and the handlers share: deterministic time, TTL on it, and a
local stack that leaves moto as it found it."""

from __future__ import annotations

import time

import json
from pathlib import Path

import pytest

from longstep import clock as runtime_clock
from longstep_kit.local import moto_patches
from longstep_kit.local.clock import EPOCH
from longstep_kit.local.faults import Fault
from longstep_kit.local.runner import RunOptions, run_scenario
from longstep_kit.local.scenario import load_scenario
from longstep_kit.local.stack import LocalStack

SCENARIOS = Path(__file__).resolve().parents[2] / "events" / "scenarios"
DAY = 86_400


def _moto_attributes() -> dict[str, object]:
    """The moto attributes the local stack patches, as found now."""
    from moto.awslambda_simple.models import LambdaSimpleBackend
    from moto.dynamodb.models import DynamoDBBackend
    from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl
    from moto.stepfunctions.parser.asl.component.state.exec import execute_state
    from moto.stepfunctions.parser.asl.component.state.wait.wait_function.wait_function import WaitFunction
    from moto.stepfunctions.parser.asl.eval import environment
    from moto.stepfunctions.parser.asl.eval.callback import callback
    from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker

    return {
        "LambdaSimpleBackend.invoke": vars(LambdaSimpleBackend).get("invoke"),
        "DynamoDBBackend.put_item": vars(DynamoDBBackend).get("put_item"),
        "retrier_decl.time": retrier_decl.time,
        "execute_state.Thread": execute_state.Thread,
        "execute_state.threading": execute_state.threading,
        "WaitFunction._wait_interval": vars(WaitFunction).get("_wait_interval"),
        "environment.threading": environment.threading,
        "Environment.set_error": vars(environment.Environment).get("set_error"),
        "callback.Event": callback.Event,
        "ExecutionWorker.stop": vars(ExecutionWorker).get("stop"),
    }


def test_a_timer_scenario_has_the_same_transcript_on_every_run_and_moto_is_restored():
    before = _moto_attributes()
    hashes, items = [], []
    for _ in range(2):
        with LocalStack() as stack:
            assert stack.clock.time() == EPOCH and runtime_clock.now() == EPOCH  # one clock for all
            assert moto_patches.applied()
            report = run_scenario(stack, load_scenario(SCENARIOS / "wait_for_timer.json"))
            hashes.append(report["transcript_sha256"])
            items.append(stack.client("dynamodb").scan(TableName=stack.outputs["CheckpointTableName"])["Count"])
        assert moto_patches.applied() == []
        assert _moto_attributes() == before  # every patch undone: the originals are back
        wall_before, now, wall_after = time.time(), runtime_clock.now(), time.time()
        assert wall_before <= now <= wall_after  # the handlers' clock is wall time again, whatever the machine's date
    assert report["status"] == "SUCCEEDED"
    assert hashes[0] == hashes[1]  # nothing in the transcript depends on the wall clock
    assert items[0] == items[1]


@pytest.fixture(scope="module")
def stack():
    with LocalStack() as local:
        yield local


def test_an_item_with_a_three_day_ttl_is_there_after_two_days_and_gone_after_three(stack):
    table = stack.outputs["CheckpointTableName"]
    attribute = stack.ttl_attributes[table]  # from the template's TimeToLiveSpecification
    ddb = stack.client("dynamodb")
    assert ddb.describe_time_to_live(TableName=table)["TimeToLiveDescription"] == {"TimeToLiveStatus": "ENABLED", "AttributeName": attribute}
    now = stack.clock.time()
    key = {"pk": {"S": "ttl-probe"}, "sk": {"S": "RUN"}}
    ddb.put_item(TableName=table, Item={**key, attribute: {"N": str(int(now) + 3 * DAY)}})
    ddb.put_item(TableName=table, Item={"pk": {"S": "ttl-probe"}, "sk": {"S": "NOT-A-NUMBER"}, attribute: {"S": "0"}})
    stack.clock.advance(2 * DAY)
    assert "Item" in ddb.get_item(TableName=table, Key=key)
    stack.clock.advance(DAY)  # at the instant itself it has not expired yet: less than now expires
    assert "Item" in ddb.get_item(TableName=table, Key=key)
    stack.clock.advance(1)
    assert "Item" not in ddb.get_item(TableName=table, Key=key)
    # DynamoDB ignores a TTL attribute that is not a Number.
    assert "Item" in ddb.get_item(TableName=table, Key={"pk": {"S": "ttl-probe"}, "sk": {"S": "NOT-A-NUMBER"}})


def test_advance_fires_due_timers_in_order_and_handlers_read_the_same_time(stack):
    # A Pass -> Wait 1 hour -> Pass machine: the Wait fires when advance reaches it.
    sfn = stack.client("stepfunctions")
    definition = {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 3600, "End": True}}}
    arn = sfn.create_state_machine(name="clock-probe", definition=json.dumps(definition), roleArn="arn:aws:iam::123456789012:role/x")[
        "stateMachineArn"
    ]
    start = stack.clock.time()
    with stack.clock.held():
        execution = sfn.start_execution(stateMachineArn=arn)["executionArn"]
        from longstep_kit.testing.wait import wait_until

        wait_until("the Wait state to park", lambda: stack.clock.waits and stack.clock.waits[-1] == 3600)
        stack.clock.advance(1800)
        assert sfn.describe_execution(executionArn=execution)["status"] == "RUNNING"
        stack.clock.advance(1800)
    from longstep_kit.testing.wait import wait_execution

    assert wait_execution(sfn, execution, 10)["status"] == "SUCCEEDED"
    assert stack.clock.time() == start + 3600 == runtime_clock.now()


def test_runs_one_after_another_on_one_stack_each_start_at_the_first_instant(stack):
    # A timer's end reaches the transcript: a run that started where the previous one left off
    # (two virtual days later) would have another transcript than a run on a fresh stack.
    timer = load_scenario(SCENARIOS / "wait_for_timer.json")
    reports = []
    for attempt in range(2):
        stack.reset_data()
        reports.append(run_scenario(stack, timer, RunOptions(execution_name=f"timer-{attempt}", timeout_seconds=120)))
        assert stack.clock.time() > EPOCH + 2 * DAY  # the run waited its two days
    assert [r["status"] for r in reports] == ["SUCCEEDED", "SUCCEEDED"]
    assert reports[0]["transcript_sha256"] == reports[1]["transcript_sha256"]
    assert reports[0]["virtual_seconds"] == reports[1]["virtual_seconds"]


def test_a_restart_leaves_the_clock_free_for_the_next_run_on_the_stack(stack):
    # --restart-at stops the execution from inside an invocation: the stop is the operator's, not
    # the function role's (IAM enforcement denied it: no restart, and a hold on the clock leaked,
    # so the next run that needed time to move, a retry's backoff, hung).
    triage = load_scenario(SCENARIOS / "triage.json")
    stack.reset_data()
    restarted = run_scenario(stack, triage, RunOptions(run_id="clock-restart", restart_at=2, timeout_seconds=120))
    assert restarted["status"] == "SUCCEEDED" and restarted["restarts"] == 1
    assert restarted["executions"] == 2  # the stop happened and a new execution resumed the run
    assert stack.clock.idle()  # nothing holds the clock once the run is over
    stack.reset_data()
    crashed = run_scenario(stack, triage, RunOptions(run_id="clock-retry", faults=[Fault("after_model", 1)], timeout_seconds=120))
    assert crashed["status"] == "SUCCEEDED" and crashed["faults_injected"]
    assert crashed["virtual_seconds"] > 0  # the retry's backoff passed on the clock
