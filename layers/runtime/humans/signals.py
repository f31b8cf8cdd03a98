"""Signals for ``wait_for`` event waits, with no race that can lose one.

One record per (run, event name) holds either a waiter (its task token and match) or a signal
that arrived first (its payload). Both sides write it with conditional updates, so whichever
comes second finds the other: a waiter that finds a buffered signal takes it at once; a signal
that finds a waiter hands it the payload through the task token.

A signal is marked consumed only after ``SendTaskSuccess`` succeeded: a failed call leaves the
record as it was (the caller may send the signal again). A waiter whose wait already timed out
leaves a dead token behind; Step Functions answers ``TaskTimedOut`` (or ``InvalidToken``,
``TaskDoesNotExist``) for it
(https://docs.aws.amazon.com/step-functions/latest/apireference/API_SendTaskSuccess.html), and the
signal is then kept buffered for the next wait on that event instead of being dropped.
"""

from __future__ import annotations

import json
from typing import Any

from longstep import clock
from longstep import keys
from longstep.store import CheckpointStore, Condition

WAITING, SIGNALED, CONSUMED = "waiting", "signaled", "consumed"
DELIVERED, BUFFERED, IGNORED = "delivered", "buffered", "ignored"
# Step Functions' answers for a token nobody waits on any more.
DEAD_TOKEN_ERRORS = ("TaskTimedOut", "InvalidToken", "TaskDoesNotExist")
_ATTEMPTS = 5  # each attempt reacts to a concurrent change of the record


class SignalRecordBusyError(RuntimeError):
    """The signal record kept changing under concurrent writers; nothing was lost, try again."""


def signal_key(event: str) -> str:
    """Sort key of the signal record of ``event``."""
    return keys.signal_key(event)


def matches(payload: Any, match: dict[str, Any]) -> bool:
    """Whether ``payload`` holds every key/value of ``match``."""
    return isinstance(payload, dict) and all(payload.get(k) == v for k, v in match.items())


def dead_token(exc: BaseException) -> bool:
    """Whether ``exc`` is Step Functions saying the token's task is over (timed out or gone)."""
    code = (getattr(exc, "response", None) or {}).get("Error", {}).get("Code")
    return code in DEAD_TOKEN_ERRORS


def register_waiter(store: CheckpointStore, sfn: Any, run_id: str, event: str, match: dict[str, Any], token: str) -> str:
    """Park a ``wait_for`` on ``event``; take a matching signal that arrived first.

    A buffered signal is handed over through ``token`` first and marked consumed after; one that
    does not match the wait is dropped (as a signal that does not match a parked waiter is).

    Returns:
        ``waiting``, or ``consumed`` when a buffered signal was handed over at once.
    """
    sk = signal_key(event)
    for _ in range(_ATTEMPTS):
        current = store.get(run_id, sk) or {}
        if current.get("status") == SIGNALED:
            payload = json.loads(current["payload"])
            if matches(payload, match):
                sfn.send_task_success(taskToken=token, output=json.dumps({"payload": payload}))
                # A newer signal that replaced this one meanwhile stays buffered (condition fails).
                store.update(
                    run_id,
                    sk,
                    {"status": CONSUMED, "consumed_at": clock.now()},
                    when=Condition(equal={"status": SIGNALED, "payload": current["payload"]}),
                )
                return CONSUMED
        # The record's TTL is renewed: a signal nobody waits for is not kept forever.
        expected = (
            Condition(equal={"status": SIGNALED, "payload": current["payload"]})
            if current.get("status") == SIGNALED
            else Condition(not_equal={"status": SIGNALED})
        )
        parked = store.update(
            run_id,
            sk,
            {"status": WAITING, "task_token": token, "match": json.dumps(match), "requested_at": clock.now()},
            remove=("payload",),
            when=expected,
            expires=True,
        )
        if parked is not None:
            return WAITING
    raise SignalRecordBusyError(f"signal record {run_id}/{sk} kept changing; try again")


def deliver(store: CheckpointStore, sfn: Any, run_id: str, event: str, payload: Any) -> str:
    """Deliver a signal: to the waiter if one is parked and matches, else keep it for the next wait.

    Returns:
        ``delivered``; ``buffered`` (no live waiter: nobody waits, or the wait timed out and its
        token is dead); or ``ignored`` (a live waiter is parked but the payload does not match).

    Raises:
        botocore's ClientError: ``SendTaskSuccess`` failed for another reason (throttling, access):
            nothing was consumed, the signal may be sent again.
    """
    sk = signal_key(event)
    body = json.dumps(payload)
    for _ in range(_ATTEMPTS):
        current = store.get(run_id, sk)
        if current and current.get("status") == WAITING:
            if not matches(payload, json.loads(current.get("match") or "{}")):
                return IGNORED
            token = current["task_token"]
            try:
                sfn.send_task_success(taskToken=token, output=json.dumps({"payload": payload}))
            except Exception as exc:  # noqa: BLE001 - sorted by Step Functions' error code
                if not dead_token(exc):
                    raise
                # The wait is over (timed out): keep the signal for the next wait on this event.
                kept = store.update(
                    run_id,
                    sk,
                    {"status": SIGNALED, "payload": body, "signaled_at": clock.now()},
                    remove=("task_token", "match"),
                    when=Condition(equal={"status": WAITING, "task_token": token}),
                    expires=True,
                )
                if kept is not None:
                    return BUFFERED
                continue
            store.update(
                run_id,
                sk,
                {"status": CONSUMED, "payload": body, "consumed_at": clock.now()},
                remove=("task_token",),
                when=Condition(equal={"status": WAITING, "task_token": token}),
            )
            return DELIVERED
        buffered = store.update(
            run_id,
            sk,
            {"status": SIGNALED, "payload": body, "signaled_at": clock.now()},
            when=Condition(not_equal={"status": WAITING}),
            expires=True,
        )
        if buffered is not None:
            return BUFFERED
    raise SignalRecordBusyError(f"signal record {run_id}/{sk} kept changing; try again")
