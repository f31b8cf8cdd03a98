"""The StepStore contract, on the in-memory store (tests/functional/test_store_contract.py runs the
same tests on DynamoDB through moto): put once, consistent reads, ranges, conditional updates."""

import pytest

from longstep import keys
from longstep.inmemory import InMemoryStore
from longstep.store import MAX_ITEM_BYTES, AlreadyRecordedError, Condition, RecordTooLargeError, StepRecord

RUN = "run-1"


@pytest.fixture
def store():
    return InMemoryStore("checkpoints")


def test_put_once_writes_once_and_keeps_the_first_record(store):
    store.put_once(RUN, "x", {"v": 1})
    with pytest.raises(AlreadyRecordedError):
        store.put_once(RUN, "x", {"v": 2})
    assert store.get(RUN, "x")["v"] == 1


def test_get_returns_plain_values_with_the_key_and_an_expiry(store):
    store.put(RUN, "x", {"s": "text", "n": 3, "f": 0.5, "b": b"\x01", "ok": False, "doc": {"a": 1}})
    item = store.get(RUN, "x")
    assert {k: item[k] for k in ("pk", "sk", "s", "n", "f", "b", "ok", "doc")} == {
        "pk": RUN,
        "sk": "x",
        "s": "text",
        "n": 3,
        "f": 0.5,
        "b": b"\x01",
        "ok": False,
        "doc": '{"a": 1}',
    }
    assert item[keys.checkpoint_table().ttl_attribute] > 0
    assert store.get(RUN, "missing") is None and store.get("other-run", "x") is None


def test_put_replaces_and_delete_removes(store):
    store.put(RUN, "x", {"v": 1})
    store.put(RUN, "x", {"w": 2})
    assert "v" not in store.get(RUN, "x") and store.get(RUN, "x")["w"] == 2
    store.delete(RUN, "x")
    store.delete(RUN, "x")  # absent: nothing happens
    assert store.get(RUN, "x") is None


def test_a_record_over_the_item_limit_is_refused(store):
    with pytest.raises(RecordTooLargeError, match="over"):
        store.put_once(RUN, "big", {"blob": b"\x00" * MAX_ITEM_BYTES})
    assert store.get(RUN, "big") is None


def test_steps_are_recorded_once_and_read_in_turn_order_without_snapshots(store):
    for turn in (10, 2, 1):
        store.record_step(RUN, keys.model_step_key(turn), "model", "converse", {"turn": turn})
    store.record_step(RUN, keys.tool_step_key(2, 0), "tool", "grep", {"out": "x" * 2_000})
    store.put_once(RUN, keys.snapshot_key(2), {"state": "{}"})
    store.put_once(RUN, keys.summary_key(2), {"summary": "{}"})
    with pytest.raises(AlreadyRecordedError):
        store.record_step(RUN, keys.model_step_key(2), "model", "converse", {"again": True})
    assert [s.sk for s in store.steps(RUN)] == [keys.model_step_key(1), keys.model_step_key(2), keys.tool_step_key(2, 0), keys.model_step_key(10)]
    assert store.get_step(RUN, keys.tool_step_key(2, 0)) == StepRecord(keys.tool_step_key(2, 0), "tool", "grep", {"out": "x" * 2_000})
    assert [s.sk for s in store.steps_between(RUN, 2, 10)] == [keys.model_step_key(2), keys.tool_step_key(2, 0)]
    assert [s.sk for s in store.steps_between(RUN, 3)] == [keys.model_step_key(10)]


def test_ranges_and_prefixes_in_key_order_and_reversed(store):
    for sk in ("a#1", "a#2", "a#3", "b#1"):
        store.put(RUN, sk, {})
    assert [i["sk"] for i in store.query_prefix(RUN, "a#")] == ["a#1", "a#2", "a#3"]
    assert [i["sk"] for i in store.query_between(RUN, "a#2", "b#1")] == ["a#2", "a#3", "b#1"]
    assert [i["sk"] for i in store.query_between(RUN, "a#", "a#~", newest_first=True, limit=2)] == ["a#3", "a#2"]
    assert store.latest(RUN, "a#", "a#2")["sk"] == "a#2"
    assert store.latest(RUN, "c#", "c#~") is None


def test_update_creates_sets_removes_and_returns_the_record_before(store):
    assert store.update(RUN, "sig", {"status": "waiting", "token": "t1"}, expires=True) == {}
    before = store.update(RUN, "sig", {"status": "done", "at": 1.5}, remove=("token",))
    assert before["status"] == "waiting" and before["token"] == "t1"
    after = store.get(RUN, "sig")
    assert after["status"] == "done" and after["at"] == 1.5 and "token" not in after
    assert after[keys.checkpoint_table().ttl_attribute] > 0


@pytest.mark.parametrize(
    ("when", "holds"),
    [
        (Condition(equal={"status": "waiting"}), True),
        (Condition(equal={"status": "signaled"}), False),
        (Condition(equal={"status": "waiting", "token": "t2"}), False),
        (Condition(not_equal={"status": "signaled"}), True),
        (Condition(not_equal={"status": "waiting"}), False),
        (Condition(not_equal={"absent": "x"}), True),
        (Condition(below={"n": 5}), True),
        (Condition(below={"n": 3}), False),
        (Condition(below={"absent": 1}), True),
        (Condition(exists=True), True),
        (Condition(exists=False), False),
        (Condition(any_of=(Condition(equal={"status": "signaled"}), Condition(equal={"token": "t1"}))), True),
        (Condition(any_of=(Condition(equal={"status": "signaled"}), Condition(absent=("token",)))), False),
        (Condition(exists=True, any_of=(Condition(absent=("by",)), Condition(equal={"by": "w"}))), True),
        (Condition(equal={"n": 3}, any_of=(Condition(equal={"status": "signaled"}), Condition(below={"n": 3}))), False),
    ],
)
def test_an_update_happens_only_when_its_condition_holds(store, when, holds):
    store.put(RUN, "rec", {"status": "waiting", "token": "t1", "n": 3})
    result = store.update(RUN, "rec", {"changed": True}, when=when)
    assert (result is not None) is holds
    assert store.get(RUN, "rec").get("changed", False) is holds


def test_a_condition_on_an_absent_record(store):
    assert store.update(RUN, "new", {"v": 1}, when=Condition(exists=True)) is None
    assert store.get(RUN, "new") is None
    assert store.update(RUN, "new", {"v": 1}, when=Condition(equal={"status": "x"})) is None
    assert store.update(RUN, "new", {"v": 1}, when=Condition(not_equal={"status": "x"})) == {}
    assert store.get(RUN, "new")["v"] == 1
