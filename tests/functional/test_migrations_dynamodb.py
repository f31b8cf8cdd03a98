"""The schema-version tests of tests/unit/test_migrations.py on DynamoDB (moto) with
CheckpointStore, and a run recorded in the previous format resumed by today's handlers."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from moto import mock_aws

from longstep import keys
from longstep.store import CheckpointStore
from longstep import runtime as runtime_module
from tests.functional.conftest import handler
from tests.unit.test_migrations import *  # noqa: F403 - the same tests, on this module's fixtures
from tests.unit.test_migrations import typed_items


@pytest.fixture
def store():
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        ddb.create_table(TableName="checkpoints", **keys.checkpoint_table().create_table_arguments())
        yield CheckpointStore("checkpoints", ddb)


def _put_raw(store: CheckpointStore, items: list[dict[str, Any]]) -> None:
    for item in items:
        store.client.put_item(TableName=store.table_name, Item=item)


def _get_raw(store: CheckpointStore, run_id: str, sk: str) -> dict[str, Any]:
    return store.client.get_item(TableName=store.table_name, Key={"pk": {"S": run_id}, "sk": {"S": sk}})["Item"]


@pytest.fixture
def raw_put():
    return _put_raw


@pytest.fixture
def raw_get():
    return _get_raw


def test_a_run_recorded_in_the_previous_format_resumes_and_replays_every_turn(aws):
    """The triage run's v1 records in the table: Init attaches to the run and every model turn
    replays its recorded reply; the model is never called."""
    items = typed_items("triage")
    for item in items:
        aws["ddb"].put_item(TableName="checkpoints", Item=item)
    run = next(i for i in items if i["sk"]["S"] == keys.RUN_RECORD)
    init, model = handler("init_run"), handler("model_turn")
    start = {
        "run_id": "triage-v1",
        "goal": run["goal"]["S"],
        "agent": run["agent"]["S"],
        "max_turns": 20,
        "model": {"provider": "scripted", "script_uri": "s3://longstep-test-artifacts/scripts/triage.json"},
    }
    cursor = init(start)
    assert cursor["resumed"] is True
    turns = sum(1 for i in items if keys.parse(i["sk"]["S"]).kind == keys.MODEL)
    cursor = {**cursor, "next_turn": 0}
    replayed = []
    while cursor["next_turn"] < turns:
        cursor = model(cursor)
        replayed.append(cursor["replayed"])
    assert replayed == [True] * turns
    assert turns == 9 and sum(p.calls for p in runtime_module._script_cache.values()) == 0
