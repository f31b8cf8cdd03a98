"""Durable steps: execute once, record before returning, replay the record ever after.

A step is identified by its sort key in the run (``step#<turn>#model``, ``step#<turn>#tool#<call>``).
Two concurrent invocations of the same step (Lambda is at-least-once) cannot both run it: the
loser gets ``StepInProgressError``, which the state machine retries, and then replays the
winner's record. The runtime's lock is the step's own record (``RecordLease``,
``longstep.claims``): one conditional write claims the step or hands back its record, a second
writes the result into the claim. ``PowertoolsStepLock`` (a lock on the idempotency table,
Powertools idempotency) and ``NoLock`` wrap the older path: look for the record, then execute
under the lock and put the record once.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from longstep import clock
from longstep.claims import ATTEMPT_ATTRIBUTE, LEASE_ATTRIBUTE, is_claim
from longstep.errors import NonDeterminismError, StepInProgressError, StepRecordLostError
from longstep.store import AlreadyRecordedError, Condition, StepRecord, StepStore, step_record

LOCK_KEY_PREFIX = "longstep-step"
# A claim's lease when the invocation's deadline is unknown: Lambda's longest timeout.
# https://docs.aws.amazon.com/lambda/latest/dg/configuration-timeout.html
DEFAULT_LEASE_SECONDS = 900
_persistence: dict[tuple[str, int], Any] = {}
_persistence_lock = threading.Lock()


@dataclass(frozen=True)
class StepOutcome:
    """The result of a durable step and whether it came from the record."""

    result: Any
    replayed: bool


class StepLock(Protocol):
    """Runs ``fn`` while holding an exclusive lock named ``key``."""

    def run(self, key: str, fn: Callable[[], Any]) -> Any: ...


class NoLock:
    """A lock that locks nothing: for unit tests of pure step logic."""

    def run(self, key: str, fn: Callable[[], Any]) -> Any:
        return fn()


# The claims this process's invocations hold, by lock key: (store, run_id, sk, attempt). Only
# ``RecordLease.expire`` reads it (the local stack's crash, which skips to the lease's end).
_held: dict[str, tuple[Any, str, str, str]] = {}


class RecordLease:
    """The step's own record is its lock, leased until the invocation would time out.

    Args:
        lambda_context: the invocation's context: the lease ends with its remaining time, so the
            claim of an invocation that crashed is free when it would have timed out.
        store: the checkpoint store, for ``expire`` (the local stack's crashes).
        lease_seconds: the lease when there is no context.
    """

    def __init__(self, lambda_context: Any = None, store: Any = None, lease_seconds: float = DEFAULT_LEASE_SECONDS) -> None:
        self.lambda_context = lambda_context
        self.store = store
        self.lease_seconds = lease_seconds

    def lease_until(self) -> float:
        """When a claim taken now runs out (epoch seconds, on ``longstep.clock``)."""
        remaining = getattr(self.lambda_context, "get_remaining_time_in_millis", None)
        seconds = remaining() / 1000 if callable(remaining) else self.lease_seconds
        return clock.now() + seconds

    def expire(self, key: str) -> bool:
        """End a crashed invocation's claim now, as if its lease had run out (the local stack
        skips that wait with this; in AWS the lock-wait retrier outlasts it).

        Returns:
            True when a live claim was ended.
        """
        held = _held.pop(key, None)
        if held is None:
            return False
        store, run_id, sk, attempt = held
        store = self.store or store
        return store.update(run_id, sk, {LEASE_ATTRIBUTE: 0}, when=Condition(equal={ATTEMPT_ATTRIBUTE: attempt})) is not None

    def run(self, key: str, fn: Callable[[], Any]) -> Any:
        """Not used: ``run_step`` claims the step's record itself when given a RecordLease."""
        raise TypeError("RecordLease is a step record's lease: run_step takes it, not lock.run")


class PowertoolsStepLock:
    """A step lock on the idempotency table, using Powertools idempotency.

    Args:
        table_name: the idempotency table (Powertools layout).
        client: a boto3 DynamoDB client.
        lambda_context: the invocation's context; Powertools uses its remaining time so that the
            lock of an invocation that crashed expires when that invocation would have timed out.
        expires_after_seconds: how long a completed lock record is kept.
    """

    def __init__(self, table_name: str, client: Any, lambda_context: Any = None, expires_after_seconds: int = 3600) -> None:
        from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer, IdempotencyConfig

        self.table_name = table_name
        self.client = client
        # One persistence layer per table and client: building one registers a hook on the client,
        # and a warm container would otherwise pile up a hook per invocation.
        key = (table_name, id(client))
        with _persistence_lock:
            if key not in _persistence:
                _persistence[key] = DynamoDBPersistenceLayer(table_name=table_name, boto3_client=client)
        self._persistence = _persistence[key]
        self._config = IdempotencyConfig(event_key_jmespath="key", expires_after_seconds=expires_after_seconds)
        if lambda_context is not None:
            self._config.register_lambda_context(lambda_context)
        # Configure now, as the decorator would on first use, so record ids can be computed.
        self._persistence.configure(self._config, key_prefix=LOCK_KEY_PREFIX)

    def record_id(self, key: str) -> str:
        """The id of the idempotency-table record that holds the lock named ``key``."""
        return self._persistence._get_hashed_idempotency_key({"key": key})

    def expire(self, key: str) -> bool:
        """Release an abandoned in-progress lock now, as if its holder had reached its deadline.

        A crashed invocation leaves its lock until the time it would have timed out; Powertools
        then lets the next invocation take over. The local stack skips that wait with this.

        Returns:
            True when an in-progress lock was released.
        """
        try:
            self.client.update_item(
                TableName=self.table_name,
                Key={"id": {"S": self.record_id(key)}},
                UpdateExpression="SET in_progress_expiration = :zero",
                ConditionExpression="#status = :inprogress",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={":zero": {"N": "0"}, ":inprogress": {"S": "INPROGRESS"}},
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            return False
        return True

    def run(self, key: str, fn: Callable[[], Any]) -> Any:
        from aws_lambda_powertools.utilities.idempotency import idempotent_function
        from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyAlreadyInProgressError

        @idempotent_function(
            data_keyword_argument="step",
            persistence_store=self._persistence,
            config=self._config,
            key_prefix=LOCK_KEY_PREFIX,
        )
        def locked(step: dict[str, str]) -> Any:
            return fn()

        try:
            return locked(step={"key": key})
        except IdempotencyAlreadyInProgressError:
            raise StepInProgressError(f"step {key} is being executed by another invocation") from None


def check_matches(record: StepRecord, kind: str, name: str) -> None:
    """Raise NonDeterminismError unless a recorded step is the one the code asks for."""
    if record.kind != kind or record.name != name:
        raise NonDeterminismError(f"step {record.sk} was recorded as {record.kind}:{record.name} but the code now asks for {kind}:{name}")


def run_step(
    store: StepStore,
    lock: StepLock,
    *,
    run_id: str,
    sk: str,
    kind: str,
    name: str,
    lock_key: str,
    execute: Callable[[], Any],
) -> StepOutcome:
    """Replay the step at ``sk`` if recorded; otherwise execute it under the lock and record it.

    Args:
        store: the checkpoint store.
        lock: the lock against concurrent duplicates.
        run_id: the run.
        sk: the step's sort key.
        kind: ``model`` or ``tool``; checked against the record on replay.
        name: model operation or tool name; checked against the record on replay.
        lock_key: the step's idempotency key (``run_id:seq`` or ``run_id:seq:call``).
        execute: computes the result (JSON-serialisable); called at most once per invocation.

    Returns:
        The step's result and whether it was replayed.

    Raises:
        NonDeterminismError: the record belongs to a different step kind or name.
        StepInProgressError: another invocation holds the lock.
    """
    if isinstance(lock, RecordLease):
        return _run_claimed(store, lock, run_id=run_id, sk=sk, kind=kind, name=name, lock_key=lock_key, execute=execute)
    recorded = store.get_step(run_id, sk)
    if recorded is not None:
        check_matches(recorded, kind, name)
        return StepOutcome(recorded.result, replayed=True)

    executed: list[bool] = []

    results: list[Any] = []

    def body() -> dict[str, Any]:
        again = store.get_step(run_id, sk)  # recorded between our read and taking the lock
        if again is not None:
            check_matches(again, kind, name)
            results.append(again.result)
            return {"recorded": sk}
        result = execute()
        try:
            store.record_step(run_id, sk, kind, name, result)
        except AlreadyRecordedError:
            winner = store.get_step(run_id, sk)
            assert winner is not None
            check_matches(winner, kind, name)
            results.append(winner.result)
            return {"recorded": sk}
        executed.append(True)
        results.append(result)
        # The lock keeps only a marker: the result lives in the checkpoint table, once.
        return {"recorded": sk}

    lock.run(lock_key, body)
    if results:
        return StepOutcome(results[0], replayed=not executed)
    # Another invocation completed the step while we waited: its record is the result.
    recorded = store.get_step(run_id, sk)
    if recorded is None:
        raise StepRecordLostError(f"step {sk} of run {run_id} completed but its record is gone (removed by hand?)")
    check_matches(recorded, kind, name)
    return StepOutcome(recorded.result, replayed=True)


def _run_claimed(
    store: StepStore, lease: RecordLease, *, run_id: str, sk: str, kind: str, name: str, lock_key: str, execute: Callable[[], Any]
) -> StepOutcome:
    """``run_step`` with the step's record as its lock (``longstep.claims``): claim, execute, complete."""
    attempt = uuid.uuid4().hex
    found = store.claim_step(run_id, sk, kind, name, attempt, lease.lease_until())
    # Our own claim handed back: the put landed but its response was lost, and the SDK's retry
    # failed on it (attempt ids are fresh per invocation, so no other attempt holds this one).
    if found is not None and not (is_claim(found) and found.get(ATTEMPT_ATTRIBUTE) == attempt):
        return _replay(store, found, run_id, sk, kind, name)
    _held[lock_key] = (store, run_id, sk, attempt)
    try:
        result = execute()
        completed = store.complete_step(run_id, sk, kind, name, result, attempt)
    except Exception:
        # Nothing recorded (the step failed, or its result was refused: too large): the retry
        # may claim the step at once. A crash leaves the lease to run out.
        _held.pop(lock_key, None)
        store.release_step(run_id, sk, attempt)
        raise
    _held.pop(lock_key, None)
    if completed:
        return StepOutcome(result, replayed=False)
    # Our lease ran out and another attempt claimed the step (we stalled: a zombie); its record
    # stands, and ours is not written.
    return _replay(store, store.get(run_id, sk) or {}, run_id, sk, kind, name)


def _replay(store: StepStore, found: dict[str, Any], run_id: str, sk: str, kind: str, name: str) -> StepOutcome:
    """The outcome of a step whose record another attempt holds: its result (a repeated tool
    result read from the record holding it), or StepInProgressError."""
    if not found or is_claim(found):
        raise StepInProgressError(f"step {sk} of run {run_id} is being executed by another invocation")
    recorded = step_record(found)
    check_matches(recorded, kind, name)
    return StepOutcome(store.resolve(run_id, [recorded])[0].result, replayed=True)
