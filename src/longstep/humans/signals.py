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
from longstep.store import CheckpointStore, Condition

WAITING, SIGNALED, CONSUMED = "waiting", "signaled", "consumed"


def signal_key(event: str) -> str:
    """Sort key of the signal record of ``event``."""
    return keys.signal_key(event)


def matches(payload: Any, match: dict[str, Any]) -> bool:
    """Whether ``payload`` holds every key/value of ``match``."""
    return isinstance(payload, dict) and all(payload.get(k) == v for k, v in match.items())


def register_waiter(store: CheckpointStore, sfn: Any, run_id: str, event: str, match: dict[str, Any], token: str) -> str:
    """Park a ``wait_for`` on ``event``; take a matching signal that arrived first.

    Returns:
        ``waiting``, or ``consumed`` when a buffered signal was handed over at once.
    """
    sk = signal_key(event)
    for _ in range(5):  # each loop iteration reacts to a concurrent change of the record
        taken = store.update(run_id, sk, {"status": CONSUMED, "consumed_at": clock.now()}, when=Condition(equal={"status": SIGNALED}))
        if taken is not None:
            payload = json.loads(taken["payload"])
            if matches(payload, match):
                sfn.send_task_success(taskToken=token, output=json.dumps({"payload": payload}))
                return CONSUMED
        # The record's TTL is renewed: a signal nobody waits for is not kept forever.
        parked = store.update(
            run_id, sk,
            {"status": WAITING, "task_token": token, "match": json.dumps(match), "requested_at": clock.now()},
            when=Condition(not_equal={"status": SIGNALED}),
            expires=True,
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
            handed = store.update(
                run_id, sk,
                {"status": CONSUMED, "payload": body, "consumed_at": clock.now()},
                remove=("task_token",),
                when=Condition(equal={"status": WAITING, "task_token": current["task_token"]}),
            )
            if handed is not None:
                sfn.send_task_success(taskToken=current["task_token"], output=json.dumps({"payload": payload}))
                return "delivered"
            continue
        buffered = store.update(
            run_id, sk,
            {"status": SIGNALED, "payload": body, "signaled_at": clock.now()},
            when=Condition(not_equal={"status": WAITING}),
            expires=True,
        )
        if buffered is not None:
            return "buffered"
    raise RuntimeError(f"signal record {run_id}/{sk} kept changing")  # pragma: no cover
