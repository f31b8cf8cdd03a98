"""run_step on the in-memory store: record once, replay, non-determinism, the lock."""

from typing import Any, Callable

import pytest

from longstep import keys
from longstep.errors import NonDeterminismError, StepInProgressError, StepRecordLostError
from longstep.inmemory import InMemoryStore
from longstep.steps import NoLock, run_step

RUN = "run-1"
SK = keys.model_step_key(3)


def step(store, execute: Callable[[], Any], lock=None, kind="model", name="converse"):
    return run_step(store, lock or NoLock(), run_id=RUN, sk=SK, kind=kind, name=name, lock_key=keys.idempotency_key(RUN, 3), execute=execute)


@pytest.fixture
def store():
    return InMemoryStore()


def test_a_step_runs_once_and_is_replayed_from_its_record(store):
    calls = []
    first = step(store, lambda: calls.append(1) or {"reply": "hi"})
    again = step(store, lambda: calls.append(2) or {"reply": "other"})
    assert (first.result, first.replayed) == ({"reply": "hi"}, False)
    assert (again.result, again.replayed) == ({"reply": "hi"}, True)
    assert calls == [1]
    assert store.get_step(RUN, SK).result == {"reply": "hi"}


def test_a_record_of_another_kind_or_name_is_non_determinism(store):
    step(store, lambda: {"reply": "hi"})
    with pytest.raises(NonDeterminismError, match="recorded as model:converse"):
        step(store, lambda: {}, kind="tool", name="grep")
    with pytest.raises(NonDeterminismError):
        step(store, lambda: {}, name="summarize")


def test_a_failing_step_records_nothing_and_runs_again(store):
    def boom():
        raise RuntimeError("model down")

    with pytest.raises(RuntimeError):
        step(store, boom)
    assert store.get_step(RUN, SK) is None
    assert step(store, lambda: {"reply": "ok"}).replayed is False


class RacingLock:
    """A lock inside which another invocation records the step first (Lambda runs at least once)."""

    def __init__(self, store, before_body: bool) -> None:
        self.store, self.before_body, self.keys = store, before_body, []

    def run(self, key: str, fn: Callable[[], Any]) -> Any:
        self.keys.append(key)
        if self.before_body:
            self.store.record_step(RUN, SK, "model", "converse", {"reply": "winner"})
        return fn()


def test_a_step_recorded_while_taking_the_lock_is_replayed(store):
    lock = RacingLock(store, before_body=True)
    out = step(store, lambda: pytest.fail("must not execute"), lock=lock)
    assert (out.result, out.replayed) == ({"reply": "winner"}, True)
    assert lock.keys == [keys.idempotency_key(RUN, 3)]


def test_losing_the_put_once_race_returns_the_winners_record(store):
    def execute():
        store.record_step(RUN, SK, "model", "converse", {"reply": "winner"})  # a concurrent writer
        return {"reply": "loser"}

    out = step(store, execute)
    assert (out.result, out.replayed) == ({"reply": "winner"}, True)
    assert store.get_step(RUN, SK).result == {"reply": "winner"}


class CompletedElsewhere:
    """The lock's holder finished the step: the body is not run (Powertools returns the saved marker)."""

    def __init__(self, store, record: bool) -> None:
        self.store, self.record = store, record

    def run(self, key: str, fn: Callable[[], Any]) -> Any:
        if self.record:
            self.store.record_step(RUN, SK, "model", "converse", {"reply": "theirs"})
        return {"recorded": SK}


def test_a_step_completed_by_the_lock_holder_is_read_from_its_record(store):
    out = step(store, lambda: pytest.fail("must not execute"), lock=CompletedElsewhere(store, record=True))
    assert (out.result, out.replayed) == ({"reply": "theirs"}, True)


def test_a_completed_step_whose_record_is_gone_is_an_error(store):
    with pytest.raises(StepRecordLostError, match="is gone"):
        step(store, lambda: {}, lock=CompletedElsewhere(store, record=False))


class Busy:
    def run(self, key: str, fn: Callable[[], Any]) -> Any:
        raise StepInProgressError(f"step {key} is being executed by another invocation")


def test_a_held_lock_surfaces_as_step_in_progress_and_records_nothing(store):
    with pytest.raises(StepInProgressError):
        step(store, lambda: {"reply": "x"}, lock=Busy())
    assert store.get_step(RUN, SK) is None
