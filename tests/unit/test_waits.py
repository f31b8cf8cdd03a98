"""Event signals and parked waits on the in-memory store: no order of waiter and signal loses one,
and the first answer to a parked record wins."""

import json

import pytest

from longstep import keys
from longstep.humans import signals, waiting
from longstep.inmemory import InMemoryStore

RUN = "run-1"


class StepFunctions:
    """Records the task tokens handed an output."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict]] = []
        self.entries: list[str | None] = []

    def send_task_success(self, taskToken: str, output: str) -> None:
        answer = json.loads(output)
        self.entries.append(answer.pop("entry", None))  # the entry's key, for the receiving call
        answer.pop("to", None)  # and its waiter
        self.sent.append((taskToken, answer))


@pytest.fixture
def store():
    return InMemoryStore()


@pytest.fixture
def sfn():
    return StepFunctions()


def test_a_signal_reaches_a_waiter_parked_before_it(store, sfn):
    assert signals.register_waiter(store, sfn, RUN, "ci", {"branch": "main"}, "tok-1") == signals.WAITING
    assert sfn.sent == []
    assert signals.deliver(store, sfn, RUN, "ci", {"branch": "main", "ok": True}) == "delivered"
    assert sfn.sent == [("tok-1", {"payload": {"branch": "main", "ok": True}})]
    record = store.get(RUN, keys.signal_key("ci"))
    assert record["status"] == signals.CONSUMED and "task_token" not in record


def test_a_signal_that_arrives_first_is_kept_for_the_waiter(store, sfn):
    assert signals.deliver(store, sfn, RUN, "ci", {"branch": "main"}) == "buffered"
    assert store.get(RUN, keys.signal_key("ci"))[keys.checkpoint_table().ttl_attribute] > 0  # not kept forever
    assert signals.register_waiter(store, sfn, RUN, "ci", {}, "tok-1") == signals.CONSUMED
    assert sfn.sent == [("tok-1", {"payload": {"branch": "main"}})]
    assert store.get(RUN, keys.signal_entry_key("ci", 0))["status"] == signals.CONSUMED


def test_a_signal_that_does_not_match_the_waiter_is_kept_for_a_wait_that_matches(store, sfn):
    # Issue 24: it was ignored (dropped) before; none is dropped now.
    signals.register_waiter(store, sfn, RUN, "ci", {"branch": "main"}, "tok-1")
    assert signals.deliver(store, sfn, RUN, "ci", {"branch": "dev"}) == signals.BUFFERED
    assert sfn.sent == [] and store.get(RUN, keys.signal_key("ci"))["status"] == signals.WAITING
    assert signals.deliver(store, sfn, RUN, "ci", {"branch": "main"}) == signals.DELIVERED
    assert signals.register_waiter(store, sfn, RUN, "ci", {"branch": "dev"}, "tok-2") == signals.CONSUMED
    assert sfn.sent == [("tok-1", {"payload": {"branch": "main"}}), ("tok-2", {"payload": {"branch": "dev"}})]


def test_a_second_signal_does_not_reach_a_consumed_waiter_twice(store, sfn):
    signals.register_waiter(store, sfn, RUN, "ci", {}, "tok-1")
    signals.deliver(store, sfn, RUN, "ci", {"n": 1})
    assert signals.deliver(store, sfn, RUN, "ci", {"n": 2}) == "buffered"
    assert [t for t, _ in sfn.sent] == ["tok-1"]
    assert signals.register_waiter(store, sfn, RUN, "ci", {}, "tok-2") == signals.CONSUMED  # kept for the next wait
    assert sfn.sent[-1] == ("tok-2", {"payload": {"n": 2}})


def test_signals_sent_while_nothing_waits_are_kept_in_order_and_each_delivered_once(store, sfn):
    # Issue 24: the second replaced the first before.
    for n in range(3):
        assert signals.deliver(store, sfn, RUN, "ci", {"n": n}) == signals.BUFFERED
    for n in range(3):
        assert signals.register_waiter(store, sfn, RUN, "ci", {}, f"tok-{n}") == signals.CONSUMED
    assert sfn.sent == [(f"tok-{n}", {"payload": {"n": n}}) for n in range(3)]
    assert signals.register_waiter(store, sfn, RUN, "ci", {}, "tok-3") == signals.WAITING  # none is left


class FailingStepFunctions(StepFunctions):
    """Answers every task response with a Step Functions error code."""

    def __init__(self, code: str) -> None:
        super().__init__()
        self.code = code

    def send_task_success(self, taskToken: str, output: str) -> None:
        from botocore.exceptions import ClientError

        raise ClientError({"Error": {"Code": self.code, "Message": self.code}}, "SendTaskSuccess")


def test_a_signal_is_consumed_only_once_the_waiter_was_handed_it(store):
    from botocore.exceptions import ClientError

    signals.register_waiter(store, StepFunctions(), RUN, "ci", {}, "tok-1")
    with pytest.raises(ClientError):  # throttled: nothing consumed, the sender may try again
        signals.deliver(store, FailingStepFunctions("ThrottlingException"), RUN, "ci", {"n": 1})
    record = store.get(RUN, keys.signal_key("ci"))
    assert record["status"] == signals.WAITING and [token for _, token, _ in signals.waiters(record)] == ["tok-1"]
    sfn = StepFunctions()
    assert signals.deliver(store, sfn, RUN, "ci", {"n": 1}) == signals.DELIVERED
    assert sfn.sent == [("tok-1", {"payload": {"n": 1}})]
    # The failed attempt was withdrawn: the retry is not kept a second time for a later wait.
    assert signals.register_waiter(store, sfn, RUN, "ci", {}, "tok-2") == signals.WAITING


@pytest.mark.parametrize("code", ["TaskTimedOut", "InvalidToken", "TaskDoesNotExist"])
def test_a_signal_for_a_wait_that_timed_out_is_kept_for_the_next_wait(store, code):
    signals.register_waiter(store, StepFunctions(), RUN, "ci", {}, "dead-token")
    assert signals.deliver(store, FailingStepFunctions(code), RUN, "ci", {"n": 1}) == signals.BUFFERED
    record = store.get(RUN, keys.signal_key("ci"))
    assert record["status"] == signals.ENDED and "task_token" not in record
    sfn = StepFunctions()
    assert signals.register_waiter(store, sfn, RUN, "ci", {}, "tok-2") == signals.CONSUMED
    assert sfn.sent == [("tok-2", {"payload": {"n": 1}})]


def test_a_buffered_signal_stays_if_handing_it_to_the_waiter_fails(store):
    from botocore.exceptions import ClientError

    signals.deliver(store, StepFunctions(), RUN, "ci", {"n": 1})
    with pytest.raises(ClientError):
        signals.register_waiter(store, FailingStepFunctions("ThrottlingException"), RUN, "ci", {}, "tok-1")
    sfn = StepFunctions()  # the retried WaitForEvent takes it
    assert signals.register_waiter(store, sfn, RUN, "ci", {}, "tok-1") == signals.CONSUMED
    assert sfn.sent == [("tok-1", {"payload": {"n": 1}})]


def test_a_signal_buffered_by_the_version_before_the_queue_is_still_taken(store, sfn):
    store.update(RUN, keys.signal_key("ci"), {"status": signals.SIGNALED, "payload": json.dumps({"old": True})})
    assert signals.register_waiter(store, sfn, RUN, "ci", {}, "tok-1") == signals.CONSUMED
    assert sfn.sent == [("tok-1", {"payload": {"old": True}})]
    assert signals.register_waiter(store, sfn, RUN, "ci", {}, "tok-2") == signals.WAITING


def test_a_payload_too_large_to_deliver_is_refused_naming_the_field(store, sfn):
    from longstep.errors import BadRequestError

    with pytest.raises(BadRequestError, match=r"^payload: is \d+ bytes of JSON, over the 253952"):
        signals.deliver(store, sfn, RUN, "ci", {"blob": "x" * signals.MAX_SIGNAL_BYTES})
    assert store.items(RUN) == {}  # nothing half-written


@pytest.mark.parametrize(
    ("payload", "match", "ok"), [({"a": 1, "b": 2}, {"a": 1}, True), ({"a": 1}, {"a": 2}, False), ("text", {"a": 1}, False), ({}, {}, True)]
)
def test_matches_needs_every_key_of_the_match(payload, match, ok):
    assert signals.matches(payload, match) is ok


SK = keys.escalation_key(4, -1)


def test_a_parked_record_is_listed_without_its_token_and_resolved_once(store, sfn):
    assert waiting.park(store, RUN, SK, "tok-1", {"task": "model_turn", "error": "Boom"}) == waiting.PENDING
    listed = waiting.pending(store, RUN, keys.ESCALATION_PREFIX)
    assert [(r["sk"], r["run_id"], r["task"]) for r in listed] == [(SK, RUN, "model_turn")]
    assert "task_token" not in listed[0] and keys.checkpoint_table().ttl_attribute not in listed[0]
    assert waiting.resolve(store, sfn, RUN, SK, {"action": "retry"}) == {"action": "retry"}
    assert sfn.sent == [("tok-1", {"action": "retry"})]
    with pytest.raises(waiting.AlreadyDecidedError) as err:
        waiting.resolve(store, sfn, RUN, SK, {"action": "abort"})
    assert err.value.decision == {"action": "retry"} and len(sfn.sent) == 1
    assert waiting.pending(store, RUN, keys.ESCALATION_PREFIX) == []


def test_resolving_nothing_is_not_found(store, sfn):
    with pytest.raises(waiting.WaitNotFoundError, match="nothing is waiting"):
        waiting.resolve(store, sfn, RUN, SK, {"action": "retry"})
    assert store.get(RUN, SK) is None  # the failed update created nothing


def test_parking_again_counts_the_times_and_keeps_a_pending_request_time(store, sfn):
    waiting.park(store, RUN, SK, "tok-1", {"task": "model_turn"})
    first = store.get(RUN, SK)["requested_at"]
    waiting.park(store, RUN, SK, "tok-2", {"task": "model_turn"})
    record = store.get(RUN, SK)
    assert (record["times"], record["requested_at"], record["task_token"]) == (2, first, "tok-2")
    waiting.resolve(store, sfn, RUN, SK, {"action": "retry"})
    waiting.park(store, RUN, SK, "tok-3", {"task": "model_turn"})
    assert store.get(RUN, SK)["times"] == 3 and store.get(RUN, SK)["status"] == waiting.PENDING


def test_the_answer_names_the_entry_and_the_receiving_call_consumes_it(store, sfn):
    class Crashed(Exception):
        pass

    class DiesAfterSending(StepFunctions):
        def send_task_success(self, taskToken: str, output: str) -> None:
            super().send_task_success(taskToken, output)
            raise Crashed("the sender died before marking the entry")  # and never marks it

    assert signals.deliver(store, sfn, RUN, "ci", {"n": 1}) == "buffered"
    dying = DiesAfterSending()
    with pytest.raises(Crashed):
        signals.register_waiter(store, dying, RUN, "ci", {}, "tok-1")
    (entry,) = dying.entries
    assert entry == keys.signal_entry_key("ci", 0) and store.get(RUN, entry)["status"] == signals.BUFFERED_ENTRY
    signals.received(store, RUN, {"payload": {"n": 1}, "entry": entry})  # the call that took it
    assert store.get(RUN, entry)["status"] == signals.CONSUMED
    assert signals.register_waiter(store, sfn, RUN, "ci", {}, "tok-2") == signals.WAITING  # not handed twice
    signals.received(store, RUN, {"timed_out": True})  # a timed-out wait names no entry: nothing to do


def test_parallel_waits_on_one_event_each_keep_their_place(store, sfn):
    # Two calls of one turn wait on ci side by side, each for its own build: one head record.
    assert signals.register_waiter(store, sfn, RUN, "ci", {"build": 1}, "tok-1") == signals.WAITING
    assert signals.register_waiter(store, sfn, RUN, "ci", {"build": 2}, "tok-2") == signals.WAITING
    assert signals.deliver(store, sfn, RUN, "ci", {"build": 1}) == signals.DELIVERED  # the second park replaced the first before
    assert signals.deliver(store, sfn, RUN, "ci", {"build": 2}) == signals.DELIVERED
    assert sorted(sfn.sent) == [("tok-1", {"payload": {"build": 1}}), ("tok-2", {"payload": {"build": 2}})]
    assert signals.waiters(store.get(RUN, keys.signal_key("ci"))) == []


def test_a_head_parked_before_waiter_slots_is_still_answered(store, sfn):
    store.update(RUN, keys.signal_key("ci"), {"status": signals.WAITING, "task_token": "old-tok", "match": "{}"})
    assert signals.deliver(store, sfn, RUN, "ci", {"n": 1}) == signals.DELIVERED
    assert sfn.sent == [("old-tok", {"payload": {"n": 1}})]
