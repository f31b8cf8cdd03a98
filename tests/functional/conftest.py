"""Handlers on moto: the checkpoint, idempotency and world tables and the bucket, created from the
same key schemas the stack uses, and each function's environment as the stack sets it."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any, Callable

import boto3
import pytest
from moto import mock_aws

from longstep_kit.local import moto_patches
from longstep_kit.local.atomicity import make_dynamodb_atomic
from longstep_kit.local.scenario import load_scenario
from agents import triage_world as world
from longstep import clients, keys
from longstep import settings as env
from longstep import runtime as runtime_module

EVENTS = Path(__file__).resolve().parents[2] / "events"
BUCKET = "longstep-test-artifacts"
TABLES = {
    env.ENV_CHECKPOINT_TABLE: ("checkpoints", keys.checkpoint_table()),
    env.ENV_IDEMPOTENCY_TABLE: ("idempotency", keys.idempotency_table()),
    # The sample agent's own tables, as it declares them (agents/triage_world.py).
    **{table.variable: (table.name, table.schema()) for table in world.RESOURCES},
    env.ENV_APPROVALS_TABLE: ("approvals", keys.approvals_table()),
    env.ENV_MEMORY_TABLE: ("memory", keys.memory_table()),
}
TOPIC = "longstep-test-approvals"


def load_event(name: str) -> dict[str, Any]:
    """A sample event from ``events/lambda/``."""
    return json.loads((EVENTS / "lambda" / f"{name}.json").read_text())


class FakeContext:
    function_name = "test-function"
    aws_request_id = "req-1"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:test-function"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch):
    """moto with the stack's tables and bucket, the triage world seeded and the script uploaded."""
    make_dynamodb_atomic()  # moto's conditional writes are not atomic across threads; DynamoDB's are
    with mock_aws():
        clients.reset()
        runtime_module._script_cache.clear()
        ddb = boto3.client("dynamodb")
        for var, (name, schema) in TABLES.items():
            ddb.create_table(TableName=name, **schema.create_table_arguments())
            monkeypatch.setenv(var, name)
        topic = boto3.client("sns").create_topic(Name=TOPIC)["TopicArn"]
        monkeypatch.setenv(env.ENV_APPROVAL_TOPIC_ARN, topic)
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket=BUCKET)
        monkeypatch.setenv(env.ENV_ARTIFACT_BUCKET, BUCKET)
        monkeypatch.setenv(env.ENV_OFFLOAD_THRESHOLD_BYTES, str(16 * 1024))
        monkeypatch.setenv(env.ENV_AGENTS, json.dumps({"triage": "agents.triage:build"}))
        scenario = load_scenario(EVENTS / "scenarios" / "triage.json")
        s3.put_object(Bucket=BUCKET, Key="scripts/triage.json", Body=json.dumps(scenario.script()).encode())
        world.load_world(world.TriageWorld.model_validate(scenario.world))  # the agent's own fixture loader
        try:
            yield {"ddb": ddb, "s3": s3, "scenario": scenario, "topic": topic}
        finally:
            clients.reset()
            moto_patches.undo_all()  # the atomicity patch: later tests in this worker see moto as shipped


def handler(module: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The real ``lambda_handler`` of ``longstep_functions.<module>``, called with a fake context."""
    import importlib

    fn = importlib.import_module(f"longstep_functions.{module}").lambda_handler
    return lambda event: fn(copy.deepcopy(event), FakeContext())


def scan(ddb: Any, table: str) -> list[dict[str, Any]]:
    return ddb.scan(TableName=table)["Items"]


def script_provider() -> Any:
    """The scripted provider the handlers loaded (to count real model calls)."""
    (provider,) = runtime_module._script_cache.values()
    return provider


def drive_to(turn: int, run_id: str = "func-run-1") -> None:
    """Run Init and every model turn and tool call before ``turn`` (approving any approvals)."""
    init, model, tool = handler("init_run"), handler("model_turn"), handler("call_tool")
    start = load_event("init_run")
    start["run_id"] = run_id
    cursor = init(start)
    while cursor["next_turn"] < turn:
        out = model(cursor)
        for call in out["calls"]:
            item = dict(call)
            if item["approval"]:
                item["decision"] = {"decision": "approve"}
            tool(item)
        cursor = out


os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "longstep-tests")
