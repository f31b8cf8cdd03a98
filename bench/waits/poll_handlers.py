"""The polling baseline's two Lambda handlers, run in-process by the local stack's dispatcher.

``check`` is what a polling agent runs every 5 seconds: one read of the record a decision or a
signal would be written to, and whether it is there. ``next_step`` stands for the step that runs
once it is (the Longstep runs' CallTool): it does nothing but start.
"""

from __future__ import annotations

import os
from typing import Any

import boto3

from longstep import environment

TABLE_ENV = "BENCH_POLL_TABLE"
_client: Any = None


def _ddb() -> Any:
    global _client
    if _client is None:
        _client = boto3.client("dynamodb", region_name=os.environ.get("AWS_REGION", "us-east-1"))
    return _client


def check(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """One poll: has the decision for ``event["key"]`` been written? (The function's environment is
    read as the runtime reads it: per invocation, ``longstep.environment``.)"""
    item = _ddb().get_item(TableName=environment.get(TABLE_ENV), Key={"key": {"S": event["key"]}}).get("Item")
    return {"decided": item is not None}


def next_step(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The step after the wait (its start time is what the bench measures)."""
    return {"key": event.get("key"), "done": True}
