"""The step record as its own lock (``longstep.claims``, ``RecordLease``), on the in-memory store
and on DynamoDB (moto): one claim, one result, a crashed claim taken over after its lease, and a
zombie (an attempt that stalls past its lease and then writes) that cannot overwrite the result
of the attempt that took over."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import boto3
import pytest
from moto import mock_aws

from longstep import clock, keys
from longstep.claims import is_claim
from longstep.errors import NonDeterminismError, StepInProgressError
from longstep.inmemory import InMemoryStore
from longstep.steps import RecordLease, run_step
from longstep.store import CheckpointStore

RUN = "run-claims"
SK = keys.model_step_key(4)
KEY = keys.idempotency_key(RUN, 4)
LEASE = 60.0


class Clock:
    def __init__(self) -> None:
        self.t = 1_000_000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def now() -> Iterator[Clock]:
    source = Clock()
    with clock.use_source(source):
        yield source


class Counting:
    """Counts the DynamoDB requests a client makes, by operation."""

    def __init__(self, client: Any) -> None:
        self.by_op: dict[str, int] = {}
        client.meta.events.register("before-call.dynamodb.*", self._count)

    def _count(self, model: Any, **_: Any) -> None:
        self.by_op[model.name] = self.by_op.get(model.name, 0) + 1

    def total(self) -> int:
        return sum(self.by_op.values())


def _dynamodb() -> Iterator[CheckpointStore]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(TableName="checkpoints", **keys.checkpoint_table().create_table_arguments())
        yield CheckpointStore("checkpoints", client)


@pytest.fixture(params=["memory", "dynamodb"])
def store(request: pytest.FixtureRequest) -> Iterator[Any]:
    if request.param == "memory":
        yield InMemoryStore()
    else:
        yield from _dynamodb()


@pytest.fixture
def dynamodb_store() -> Iterator[CheckpointStore]:
    yield from _dynamodb()


class Crash(BaseException):
    """A killed invocation: not an Exception, so nothing is released."""


def crash() -> Any:
    raise Crash()


def step(store: Any, execute: Callable[[], Any], lease: RecordLease | None = None, name: str = "converse") -> Any:
    return run_step(store, lease or RecordLease(lease_seconds=LEASE), run_id=RUN, sk=SK, kind="model", name=name, lock_key=KEY, execute=execute)


def test_a_step_is_claimed_recorded_once_and_replayed(store, now):
    calls: list[int] = []
    first = step(store, lambda: calls.append(1) or {"reply": "hi"})
    again = step(store, lambda: calls.append(2) or {"reply": "other"})
    assert (first.result, first.replayed, again.result, again.replayed) == ({"reply": "hi"}, False, {"reply": "hi"}, True)
    assert calls == [1]
    record = store.get(RUN, SK)
    assert not is_claim(record) and "attempt" not in record and "lease_until" not in record  # no lock left behind
    with pytest.raises(NonDeterminismError):
        step(store, lambda: {}, name="summarize")


def test_a_step_costs_two_requests_and_a_replay_one(dynamodb_store, now):
    store = dynamodb_store
    counter = Counting(store.client)
    step(store, lambda: {"reply": "hi"})
    assert counter.by_op == {"PutItem": 1, "UpdateItem": 1}
    step(store, lambda: pytest.fail("replayed, not run"))
    assert counter.by_op == {"PutItem": 2, "UpdateItem": 1}  # the failed claim handed back the record


def test_a_live_claim_is_in_progress_and_its_step_not_yet_recorded(store, now):
    def inside() -> dict[str, Any]:
        with pytest.raises(StepInProgressError):
            step(store, lambda: pytest.fail("a second attempt must not run"))
        assert store.get_step(RUN, SK) is None and store.steps(RUN) == []  # a claim is no record
        return {"reply": "mine"}

    assert step(store, inside).result == {"reply": "mine"}


def test_a_failed_step_releases_its_claim_and_the_retry_runs_at_once(store, now):
    def boom() -> Any:
        raise RuntimeError("model down")

    with pytest.raises(RuntimeError):
        step(store, boom)
    assert store.get(RUN, SK) is None  # the claim is removed: nothing of the failed attempt is kept
    assert step(store, lambda: {"reply": "retried"}).replayed is False  # no wait for the lease


def test_a_crashed_claim_is_taken_over_after_its_lease(store, now):
    with pytest.raises(Crash):
        step(store, crash)  # a killed invocation releases nothing
    with pytest.raises(StepInProgressError):
        step(store, lambda: {"reply": "too soon"})
    now.t += LEASE + 1
    assert step(store, lambda: {"reply": "taken over"}).result == {"reply": "taken over"}


def test_expire_ends_a_crashed_claim_now(store, now):
    with pytest.raises(Crash):
        step(store, crash)
    assert RecordLease().expire(KEY) is True
    assert RecordLease().expire(KEY) is False  # nothing held any more
    assert step(store, lambda: {"reply": "after"}).replayed is False


def test_a_zombie_that_writes_after_the_take_over_gets_the_winners_result(store, now):
    """A stalls past its lease; B claims and records; A wakes and writes: B's record stands."""
    order: list[str] = []

    def zombie() -> dict[str, Any]:
        now.t += LEASE + 1  # A stalls past its lease...
        b = step(store, lambda: order.append("B") or {"reply": "B"})  # ...B takes over and records
        assert (b.result, b.replayed) == ({"reply": "B"}, False)
        order.append("A")
        return {"reply": "A"}

    a = step(store, zombie)
    assert order == ["B", "A"]
    assert (a.result, a.replayed) == ({"reply": "B"}, True)  # A is told B's result, not its own
    assert store.get_step(RUN, SK).result == {"reply": "B"}
    assert not is_claim(store.get(RUN, SK))


def test_a_zombie_that_writes_while_the_take_over_runs_writes_nothing(store, now):
    """A stalls past its lease; B claims; A writes before B is done: A writes nothing, B records."""

    def b_runs() -> dict[str, Any]:
        with pytest.raises(StepInProgressError):  # A, back from its stall, finds B's claim
            step(store, lambda: {"reply": "A"}, name="converse")
        return {"reply": "B"}

    claimed = store.claim_step(RUN, SK, "model", "converse", "attempt-A", clock.now() + LEASE)  # A's claim
    assert claimed is None
    now.t += LEASE + 1
    # A's result, written with its stale claim, is refused once B holds the step:
    assert step(store, b_runs).result == {"reply": "B"}
    assert store.complete_step(RUN, SK, "model", "converse", {"reply": "A"}, "attempt-A") is False
    assert store.get_step(RUN, SK).result == {"reply": "B"}


def test_a_claim_whose_response_was_lost_is_still_the_attempts_own(store, now):
    """The claim's put lands but its response is lost; the SDK sends it again and the condition
    fails on the claim just written: the attempt holds the step and runs it (it escalated on
    StepInProgressError before)."""
    claim = store.claim_step

    def lost_response_then_retry(*args: Any, **kwargs: Any) -> Any:
        assert claim(*args, **kwargs) is None  # written
        return claim(*args, **kwargs)  # the retry hears the record that failed its condition: our own claim

    store.claim_step = lost_response_then_retry
    calls: list[int] = []
    outcome = step(store, lambda: calls.append(1) or {"reply": "hi"})
    assert (outcome.result, outcome.replayed, calls) == ({"reply": "hi"}, False, [1])
    assert not is_claim(store.get(RUN, SK))  # recorded, the claim ended
