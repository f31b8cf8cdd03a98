"""Signals from outside (issue 24): refused when nobody could ever take them, and, under concurrent
senders and waiters, each delivered once, in order, none lost."""

from __future__ import annotations

import json
import threading
from types import SimpleNamespace

import pytest
from botocore.exceptions import ClientError

from longstep import keys
from longstep.errors import SignalRefusedError, UnknownAgentError
from longstep.humans import signals
from longstep.inmemory import InMemoryStore

RUN = "run-1"


class StepFunctions:
    """A task token takes one output; a second one is refused as Step Functions refuses it."""

    def __init__(self) -> None:
        self.sent: dict[str, dict] = {}
        self._lock = threading.Lock()

    def send_task_success(self, taskToken: str, output: str) -> None:
        with self._lock:
            if taskToken in self.sent:
                raise ClientError({"Error": {"Code": "TaskTimedOut", "Message": "closed"}}, "SendTaskSuccess")
            self.sent[taskToken] = json.loads(output)


def _agents(events=None):
    def resolve(name: str):
        if name != "triage":
            raise UnknownAgentError(name)
        return SimpleNamespace(events=events)

    return resolve


@pytest.fixture
def store():
    store = InMemoryStore()
    store.put_once(RUN, keys.RUN_RECORD, {"agent": "triage", "goal": "g"})
    return store


def test_a_signal_to_a_run_that_does_not_exist_is_refused_unless_buffered(store):
    sfn = StepFunctions()
    with pytest.raises(SignalRefusedError, match=r"^run_id: no run 'later'$") as err:
        signals.send(store, sfn, "later", "ci", {}, _agents())
    assert err.value.status == 404 and store.items("later") == {}
    assert signals.send(store, sfn, "later", "ci", {"n": 1}, _agents(), buffer=True) == signals.BUFFERED


def test_a_signal_to_a_finished_run_is_refused(store):
    store.put_once(RUN, keys.FINAL_RECORD, {"output": "done"})
    with pytest.raises(SignalRefusedError, match="has finished") as err:
        signals.send(store, StepFunctions(), RUN, "ci", {}, _agents())
    assert err.value.status == 409
    assert not any(sk.startswith(keys.SIGNAL_PREFIX) for sk in store.items(RUN))


def test_a_signal_for_an_event_the_agent_never_waits_on_is_refused(store):
    with pytest.raises(SignalRefusedError, match=r"^event: run 'run-1' never waits on 'deploy' .*waits on: ci") as err:
        signals.send(store, StepFunctions(), RUN, "deploy", {}, _agents(events=("ci",)))
    assert err.value.status == 422
    assert signals.send(store, StepFunctions(), RUN, "ci", {}, _agents(events=("ci",))) == signals.BUFFERED
    # An agent that declares no events may wait on any: the signal is kept.
    assert signals.send(store, StepFunctions(), RUN, "deploy", {}, _agents()) == signals.BUFFERED


def test_a_workflow_run_is_signalled_until_it_finishes():
    store = InMemoryStore()
    store.put_once("wf-1", signals.WORKFLOW_RUN, {"workflow": "release"})
    assert signals.send(store, StepFunctions(), "wf-1", "ci", {}, _agents()) == signals.BUFFERED
    store.put_once("wf-1", signals.WORKFLOW_FINAL, {"kind": "final"})
    with pytest.raises(SignalRefusedError, match="has finished"):
        signals.send(store, StepFunctions(), "wf-1", "ci", {}, _agents())


def test_a_signal_kept_during_a_long_wait_gets_the_runs_expiry_floor(store):
    store.update(RUN, keys.RUN_RECORD, {"kept_until": 4_000_000_000})
    signals.send(store, StepFunctions(), RUN, "ci", {}, _agents())
    ttl = keys.checkpoint_table().ttl_attribute
    assert int(store.items(RUN)[keys.signal_entry_key("ci", 0)][ttl]["N"]) >= 4_000_000_000


def test_concurrent_senders_and_waiters_deliver_each_signal_once_and_in_order(store):
    sfn = StepFunctions()
    count = 8
    start = threading.Barrier(2 * count)
    errors: list[BaseException] = []

    def sender(n: int) -> None:
        start.wait()
        try:
            signals.deliver(store, sfn, RUN, "ci", {"n": n})
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def waiter(n: int) -> None:
        start.wait()
        try:
            signals.register_waiter(store, sfn, RUN, "ci", {}, f"tok-{n}")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=f, args=(n,)) for n in range(count) for f in (sender, waiter)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert errors == []
    delivered = [out["payload"]["n"] for out in sfn.sent.values()]
    left = [json.loads(r["payload"])["n"] for r in store.query_prefix(RUN, keys.signal_key("ci") + "#") if r["status"] == "buffered"]
    # Every signal reached exactly one wait or is still kept for the next: none lost, none twice.
    assert sorted(delivered + left) == list(range(count))
    # A wait that parked last may still wait while a signal stays buffered only if it was handed one.
    head = store.get(RUN, keys.signal_key("ci")) or {}
    assert not (head.get("status") == signals.WAITING and left), "a buffered signal and a parked waiter missed each other"


def test_an_agent_that_declares_its_events_cannot_wait_on_another():
    from longstep.errors import ToolInputError
    from longstep.contract.call import CallItem
    from longstep.routing import wait_routing as _wait_routing
    from longstep.tools.builtins import WaitForArgs, wait_for
    from longstep.tools.registry import ToolContext

    use = {"name": "wait_for", "input": {"event": "deploy", "timeout_seconds": 60}}
    assert _wait_routing(use, {"at": 0}, ("ci",)) == {"wait": "none"}
    assert _wait_routing(use, {"at": 0}, None)["wait"] == "event"
    item = CallItem(run_id=RUN, turn=0, call=0, tool="wait_for", wait="none")
    with pytest.raises(ToolInputError, match="event 'deploy' is not one this agent waits on"):
        wait_for(WaitForArgs.model_validate(use["input"]), ToolContext(run_id=RUN, turn=0, call=0, idempotency_key="k", item=item))


class HeldStepFunctions(StepFunctions):
    """Step Functions whose answer to ``held`` takes effect, then waits for the test to let its
    response come back: the moment between a waiter's answer and its entry's consumed mark."""

    def __init__(self, held: str) -> None:
        super().__init__()
        self.held, self.answered, self.release = held, threading.Event(), threading.Event()

    def send_task_success(self, taskToken: str, output: str) -> None:
        super().send_task_success(taskToken, output)
        if taskToken == self.held:
            self.answered.set()
            assert self.release.wait(10), "the test never let the answer return"


def _hand_over_in_flight(store, sfn: HeldStepFunctions, payload: dict) -> threading.Thread:
    """Park the waiter ``sfn.held`` and deliver ``payload`` to it in a thread held after its answer."""
    assert signals.register_waiter(store, sfn, RUN, "ci", {}, sfn.held) == signals.WAITING
    sender = threading.Thread(target=signals.deliver, args=(store, sfn, RUN, "ci", payload))
    sender.start()
    assert sfn.answered.wait(10)
    return sender


def test_a_parallel_wait_parking_while_a_signal_is_handed_to_the_first_does_not_get_it_too(store):
    # Two calls of one turn wait on one event; the one signal is answered to the first, whose
    # sender has not marked it consumed yet when the second parks (it got it too: a buffered entry).
    sfn = HeldStepFunctions("tok-a")
    sender = _hand_over_in_flight(store, sfn, {"n": 1})
    try:
        assert signals.register_waiter(store, sfn, RUN, "ci", {}, "tok-b") == signals.WAITING
    finally:
        sfn.release.set()
        sender.join(10)
    assert list(sfn.sent) == ["tok-a"]
    (entry,) = store.query_prefix(RUN, keys.signal_key("ci") + "#")
    assert entry["status"] == signals.CONSUMED


def test_a_second_sender_finding_the_first_waiter_answered_hands_the_second_its_own_signal(store):
    # Both waits parked; two signals sent at once. The second sender finds the first waiter's token
    # closed (the first sender answered it) and goes on to the second waiter with the oldest entry
    # still buffered: the first signal, answered but not yet marked (both waits got it).
    sfn = HeldStepFunctions("tok-a")
    assert signals.register_waiter(store, sfn, RUN, "ci", {}, "tok-b") == signals.WAITING
    sender = _hand_over_in_flight(store, sfn, {"n": 1})
    try:
        assert signals.deliver(store, sfn, RUN, "ci", {"n": 2}) == signals.DELIVERED
    finally:
        sfn.release.set()
        sender.join(10)
    got = sorted(out["payload"]["n"] for out in sfn.sent.values())
    assert got == [1, 2], sfn.sent
    assert [e["status"] for e in store.query_prefix(RUN, keys.signal_key("ci") + "#")] == [signals.CONSUMED] * 2


def test_a_claim_left_by_a_hander_that_died_is_offered_again_after_its_lease(store, monkeypatch):
    from longstep import clock

    now = [1_000_000.0]
    monkeypatch.setattr(clock, "now", lambda: now[0])
    sfn = StepFunctions()

    def died(taskToken: str, output: str) -> None:
        raise KeyboardInterrupt  # the hander's process ended between its claim and its answer

    assert signals.register_waiter(store, sfn, RUN, "ci", {}, "tok-a") == signals.WAITING
    monkeypatch.setattr(sfn, "send_task_success", died)
    with pytest.raises(KeyboardInterrupt):
        signals.deliver(store, sfn, RUN, "ci", {"n": 1})
    monkeypatch.undo()
    monkeypatch.setattr(clock, "now", lambda: now[0])
    assert signals.register_waiter(store, sfn, RUN, "ci", {}, "tok-b") == signals.WAITING  # claimed: not offered
    now[0] += signals.HAND_LEASE_SECONDS + 1
    assert signals.register_waiter(store, sfn, RUN, "ci", {}, "tok-c") == signals.CONSUMED
    assert sfn.sent == {"tok-c": {"payload": {"n": 1}, "entry": keys.signal_entry_key("ci", 0), "to": signals._slot("tok-c")}}


class LostResponseStepFunctions(StepFunctions):
    """The answer to ``lost`` takes effect and its response is lost: the SDK's retry hears
    ``TaskTimedOut``, as from a wait that timed out. ``meanwhile`` runs in between (the answered
    wait's call, quicker than the retry)."""

    def __init__(self, lost: str, meanwhile=None) -> None:
        super().__init__()
        self.lost, self.meanwhile = lost, meanwhile

    def send_task_success(self, taskToken: str, output: str) -> None:
        super().send_task_success(taskToken, output)
        if taskToken == self.lost:
            if self.meanwhile is not None:
                self.meanwhile(json.loads(output))
            raise ClientError({"Error": {"Code": "TaskTimedOut", "Message": "closed"}}, "SendTaskSuccess")


@pytest.mark.parametrize("call_first", [False, True], ids=["sender-retry-first", "call-first"])
def test_a_lost_response_to_one_of_two_parallel_waits_reaches_one_call_only(store, call_first):
    # The sender cannot tell its answer to the first wait reached it: it puts the signal back and
    # hands it to the second wait parked on the event. The calls that received it each mark it
    # consumed by their own wait: the one that comes second is told so (its wait parks again).
    first, second = sorted(("tok-a", "tok-b"), key=signals._slot)  # the order the sender tries them
    marks = {}
    sfn = LostResponseStepFunctions(first, (lambda out: marks.setdefault(first, signals.received(store, RUN, out))) if call_first else None)
    for token in (first, second):
        assert signals.register_waiter(store, sfn, RUN, "ci", {}, token) == signals.WAITING
    signals.deliver(store, sfn, RUN, "ci", {"n": 1})
    if call_first:  # the first wait's call marked it before the sender's retry came back: nobody else got it
        assert marks == {first: True} and list(sfn.sent) == [first]
    else:  # both waits were answered with the one signal; the sender marked it for the second
        assert sorted(sfn.sent) == sorted((first, second)) and {o["payload"]["n"] for o in sfn.sent.values()} == {1}
        assert signals.received(store, RUN, sfn.sent[first]) is False
        assert signals.received(store, RUN, sfn.sent[second]) is True
    loser = second if call_first else first
    assert signals.received(store, RUN, sfn.sent[first if call_first else second]) is True  # a retried call of the winner
    # The wait that did not get it (parked still, or parked again) takes the next signal.
    token = loser if call_first else "tok-c"
    if not call_first:
        assert signals.register_waiter(store, sfn, RUN, "ci", {}, token) == signals.WAITING
    assert signals.deliver(store, sfn, RUN, "ci", {"n": 2}) == signals.DELIVERED
    assert sfn.sent[token]["payload"] == {"n": 2} and signals.received(store, RUN, sfn.sent[token]) is True


def test_an_answer_from_before_waiters_were_named_is_marked_as_before(store):
    sfn = StepFunctions()
    assert signals.register_waiter(store, sfn, RUN, "ci", {}, "tok-a") == signals.WAITING
    assert signals.deliver(store, sfn, RUN, "ci", {"n": 1}) == signals.DELIVERED
    legacy = {k: v for k, v in sfn.sent["tok-a"].items() if k != "to"}
    assert signals.received(store, RUN, legacy) is True
    (entry,) = store.query_prefix(RUN, keys.signal_key("ci") + "#")
    assert entry["status"] == signals.CONSUMED and entry["consumed_by"] == signals._slot("tok-a")
