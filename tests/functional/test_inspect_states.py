"""``longstep_kit.ops.views.inspector.RunInspector``'s statuses from records on moto's DynamoDB and a scripted Step
Functions client: timers, generations, ages, finished and expired runs."""

from __future__ import annotations

import datetime as dt
from typing import Any

import boto3
import pytest
from moto import mock_aws

from longstep import keys
from longstep.humans.escalations import MODEL_CALL
from longstep_kit.ops.views.inspector import RunInspector
from longstep.store import CheckpointStore

ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:agent"
T0 = dt.datetime(2025, 1, 31, 12, 0, tzinfo=dt.timezone.utc)


class FakeStepFunctions:
    """ListExecutions (one execution per page, to exercise paging), DescribeExecution, no history."""

    def __init__(self, executions: list[dict[str, Any]]) -> None:
        self.executions = executions

    def list_executions(self, stateMachineArn: str, maxResults: int, statusFilter: str | None = None, nextToken: str | None = None) -> dict[str, Any]:
        found = [e for e in self.executions if statusFilter in (None, e["status"])]
        index = int(nextToken or 0)
        page: dict[str, Any] = {"executions": found[index : index + 1]}
        if index + 1 < len(found):
            page["nextToken"] = str(index + 1)
        return page

    def describe_execution(self, executionArn: str) -> dict[str, Any]:
        e = next(e for e in self.executions if e["executionArn"] == executionArn)
        return {**e, "error": e.get("error"), "cause": e.get("cause")}

    def get_execution_history(self, **kwargs: Any) -> dict[str, Any]:
        return {"events": []}


def execution(name: str, status: str, minutes: int, **extra: Any) -> dict[str, Any]:
    started = T0 + dt.timedelta(minutes=minutes)
    out = {"name": name, "executionArn": f"{ARN.replace(':stateMachine:', ':execution:')}:{name}", "status": status, "startDate": started}
    if status != "RUNNING":
        out["stopDate"] = started + dt.timedelta(minutes=1)
    return {**out, **extra}


@pytest.fixture
def store():
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        ddb.create_table(TableName="checkpoints", **keys.checkpoint_table().create_table_arguments())
        yield CheckpointStore("checkpoints", ddb)


def inspector(store: CheckpointStore, executions: list[dict[str, Any]]) -> RunInspector:
    return RunInspector(ARN, store.table_name, sfn=FakeStepFunctions(executions), dynamodb=store.client)


def reply(*uses: dict[str, Any]) -> dict[str, Any]:
    content = [{"toolUse": {"toolUseId": f"t{i}", "name": u["name"], "input": u["input"]}} for i, u in enumerate(uses)]
    return {"message": {"role": "assistant", "content": content}, "stop_reason": "tool_use", "usage": {}, "at": T0.timestamp()}


def test_a_run_waiting_for_a_timer_waits_for_an_event(store):
    store.record_step("r", keys.model_step_key(0), "model", "converse", reply({"name": "wait_for", "input": {"seconds": 3600}}))
    state = inspector(store, [execution("r", "RUNNING", 0)]).runs()[0]
    assert state.status == "waiting_for_event"
    assert state.detail == "timer until 2025-01-31T13:00:00Z (turn 0, call 0)"


def test_once_the_wait_is_recorded_the_run_is_running_again(store):
    store.record_step("r", keys.model_step_key(0), "model", "converse", reply({"name": "wait_for", "input": {"seconds": 60}}))
    store.record_step("r", keys.tool_step_key(0, 0), "tool", "wait_for", {"status": "success", "content": {"waited": "timer"}})
    (state,) = inspector(store, [execution("r", "RUNNING", 0)]).runs()
    assert (state.status, state.detail) == ("running", "execution r, last step turn 0 call 0 wait_for")
    assert state.since == (T0.timestamp())


def test_a_runs_generations_make_one_run_whose_latest_decides(store):
    runs = inspector(store, [execution("r", "SUCCEEDED", 0), execution("r--g1", "SUCCEEDED", 5), execution("r--g2", "RUNNING", 9)]).runs()
    assert [(s.run_id, s.status, s.executions, s.execution.name) for s in runs] == [("r", "running", 3, "r--g2")]


def test_failed_timed_out_and_aborted_runs_are_told_apart(store):
    """As the runs index and ``--where`` tell them (``longstep.run_status``), not all ``failed``."""
    ins = inspector(
        store,
        [
            execution("a", "FAILED", 0, error="EscalationAborted", cause="a human aborted the run at an escalation"),
            execution("b", "TIMED_OUT", 1),
            execution("c", "ABORTED", 2),
            execution("d", "SUCCEEDED", 3),
        ],
    )
    states = {s.run_id: (s.status, s.detail) for s in ins.runs()}
    assert states == {
        "a": ("failed", "FAILED: EscalationAborted: a human aborted the run at an escalation"),
        "b": ("timed_out", "TIMED_OUT"),
        "c": ("aborted", "ABORTED"),
        "d": ("succeeded", "execution d"),
    }
    assert [s.run_id for s in ins.runs("failed")] == ["a"]
    assert [s.run_id for s in ins.runs("timed_out")] == ["b"] and [s.run_id for s in ins.runs("aborted")] == ["c"]


def test_stuck_compares_the_wait_with_the_age(store):
    requested = T0.timestamp()
    store.put(
        "r",
        keys.escalation_key(2, MODEL_CALL),
        {
            "status": "pending",
            "task": "ModelTurn",
            "error": "ModelAccessError",
            "reason": "denied",
            "requested_at": requested,
            "task_token": "secret-token-123",
        },
    )
    ins = inspector(store, [execution("r", "RUNNING", 0), execution("s", "RUNNING", 0)])
    three_hours_later = requested + 3 * 3600
    (stuck,) = ins.stuck(2 * 3600, now=three_hours_later)
    assert (stuck.run_id, stuck.status, stuck.age(three_hours_later)) == ("r", "escalated", 3 * 3600)
    assert stuck.detail == "ModelTurn turn 2: ModelAccessError: denied"
    assert ins.stuck(4 * 3600, now=three_hours_later) == []


def test_a_run_whose_history_expired_is_read_from_its_records(store):
    store.put("old", keys.RUN_RECORD, {"agent": "triage", "goal": "g", "model": {"provider": "bedrock"}, "max_turns": 5})
    store.put("old", keys.FINAL_RECORD, {"output": {"status": "SUCCEEDED"}, "finished_at": T0.timestamp()})
    ins = inspector(store, [])
    state = ins.state("old")
    assert (state.status, state.since, state.execution) == ("succeeded", T0.timestamp(), None)
    view = ins.view("old")
    assert "no execution found" in " ".join(view.notes) and view.usage.executions == 0
