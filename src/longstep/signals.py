"""Signals for ``wait_for`` event waits, with no race that can lose one.

One record per (run, event name) holds either a waiter (its task token and match) or a signal
that arrived first (its payload). Both sides write it with conditional updates, so whichever
comes second finds the other: a waiter that finds a buffered signal takes it at once; a signal
that finds a waiter hands it the payload through the task token.
"""

from __future__ import annotations

import json
from typing import Any

from longstep import clock
from longstep import keys
from longstep.store import CheckpointStore

WAITING, SIGNALED, CONSUMED = "waiting", "signaled", "consumed"


_TTL = keys.checkpoint_table().ttl_attribute


def _expiry(store: CheckpointStore) -> dict[str, str]:
    """The record's TTL: a signal nobody waits for is not kept forever."""
    return {"N": str(int(clock.now()) + int(getattr(store, "retention_seconds", 90 * 86_400)))}


def signal_key(event: str) -> str:
    """Sort key of the signal record of ``event``."""
    return f"signal#{event}"


def matches(payload: Any, match: dict[str, Any]) -> bool:
    """Whether ``payload`` holds every key/value of ``match``."""
    return isinstance(payload, dict) and all(payload.get(k) == v for k, v in match.items())


def _update(store: CheckpointStore, run_id: str, sk: str, **kwargs: Any) -> dict[str, Any] | None:
    """A conditional update; None when its condition failed."""
    schema = keys.checkpoint_table()
    try:
        return store.client.update_item(
            TableName=store.table_name,
            Key={schema.partition_key: {"S": run_id}, schema.sort_key: {"S": sk}},
            ReturnValues="ALL_OLD",
            **kwargs,
        )
    except store.client.exceptions.ConditionalCheckFailedException:
        return None


def register_waiter(store: CheckpointStore, sfn: Any, run_id: str, event: str, match: dict[str, Any], token: str) -> str:
    """Park a ``wait_for`` on ``event``; take a matching signal that arrived first.

    Returns:
        ``waiting``, or ``consumed`` when a buffered signal was handed over at once.
    """
    sk = signal_key(event)
    for _ in range(5):  # each loop iteration reacts to a concurrent change of the record
        taken = _update(
            store, run_id, sk,
            UpdateExpression="SET #st = :consumed, consumed_at = :t",
            ConditionExpression="#st = :signaled",
            ExpressionAttributeNames={"#st": "status"},
            ExpressionAttributeValues={":consumed": {"S": CONSUMED}, ":signaled": {"S": SIGNALED}, ":t": {"N": str(clock.now())}},
        )
        if taken is not None:
            payload = json.loads(taken["Attributes"]["payload"]["S"])
            if matches(payload, match):
                sfn.send_task_success(taskToken=token, output=json.dumps({"payload": payload}))
                return CONSUMED
        parked = _update(
            store, run_id, sk,
            UpdateExpression="SET #st = :waiting, task_token = :tok, #match = :m, requested_at = :t, #ttl = :ttl",
            ConditionExpression="attribute_not_exists(#st) OR #st <> :signaled",
            ExpressionAttributeNames={"#st": "status", "#match": "match", "#ttl": _TTL},
            ExpressionAttributeValues={
                ":waiting": {"S": WAITING},
                ":signaled": {"S": SIGNALED},
                ":tok": {"S": token},
                ":m": {"S": json.dumps(match)},
                ":t": {"N": str(clock.now())},
                ":ttl": _expiry(store),
            },
        )
        if parked is not None:
            return WAITING
    raise RuntimeError(f"signal record {run_id}/{sk} kept changing")  # pragma: no cover


def deliver(store: CheckpointStore, sfn: Any, run_id: str, event: str, payload: Any) -> str:
    """Deliver a signal: to the waiter if one is parked and matches, else keep it for the next wait.

    Returns:
        ``delivered``, ``buffered``, or ``ignored`` (a waiter is parked but the payload does not match).
    """
    sk = signal_key(event)
    body = json.dumps(payload)
    for _ in range(5):
        current = store.get(run_id, sk)
        if current and current.get("status") == WAITING:
            if not matches(payload, json.loads(current.get("match") or "{}")):
                return "ignored"
            handed = _update(
                store, run_id, sk,
                UpdateExpression="SET #st = :consumed, payload = :p, consumed_at = :t REMOVE task_token",
                ConditionExpression="#st = :waiting AND task_token = :tok",
                ExpressionAttributeNames={"#st": "status"},
                ExpressionAttributeValues={
                    ":consumed": {"S": CONSUMED},
                    ":waiting": {"S": WAITING},
                    ":tok": {"S": current["task_token"]},
                    ":p": {"S": body},
                    ":t": {"N": str(clock.now())},
                },
            )
            if handed is not None:
                sfn.send_task_success(taskToken=current["task_token"], output=json.dumps({"payload": payload}))
                return "delivered"
            continue
        buffered = _update(
            store, run_id, sk,
            UpdateExpression="SET #st = :signaled, payload = :p, signaled_at = :t, #ttl = :ttl",
            ConditionExpression="attribute_not_exists(#st) OR #st <> :waiting",
            ExpressionAttributeNames={"#st": "status", "#ttl": _TTL},
            ExpressionAttributeValues={
                ":signaled": {"S": SIGNALED},
                ":waiting": {"S": WAITING},
                ":p": {"S": body},
                ":t": {"N": str(clock.now())},
                ":ttl": _expiry(store),
            },
        )
        if buffered is not None:
            return "buffered"
    raise RuntimeError(f"signal record {run_id}/{sk} kept changing")  # pragma: no cover
