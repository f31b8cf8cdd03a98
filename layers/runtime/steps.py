"""Durable steps: execute once, record before returning, replay the record ever after.

A step is identified by its sort key in the run (``step#<turn>#model``, ``step#<turn>#tool#<call>``).
Before executing, a step looks for its record; if found, it returns the record (replay). While
executing, it holds a lock on the idempotency table (Powertools idempotency), so two concurrent
invocations of the same step (Lambda is at-least-once) cannot both run it: the loser gets
``StepInProgressError``, which the state machine retries, and then replays the winner's record.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from longstep.errors import NonDeterminismError, StepInProgressError, StepRecordLostError
from longstep.store import AlreadyRecordedError, StepRecord, StepStore

LOCK_KEY_PREFIX = "longstep-step"
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
