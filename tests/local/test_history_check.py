"""The history checker (local/history.py): concurrent clients against one run, then the rules.

Clients race on one run of approvals.json (four approvals in one turn): two approvers decide each
of three requests at once (one approves, one rejects), and two clients start the run again while
it waits (the same execution: StartExecution is idempotent). The history of their operations, the decisions the approvals table applied, the effects
in the sample's outbox and the transcript must pass every rule; the transcript must equal a
serial run given the decisions that won. Three senders signal one run's event at once
(``tests/fixtures/wait_four.json`` waits on it four times; one sender sends twice, one after the
other): each signal reaches one wait, in the order sent, and a serial run given the signals in
the order they were taken has the same transcript. Fabricated bad histories prove each rule can
fail. A stop races each of them too (``stop`` clients): what it beats is cancelled, nothing acts
in an invocation that starts after it, and the run ends stopped.
"""

from __future__ import annotations

import json
import threading

import pytest

from longstep_kit.local.history import OK, REFUSED, History, InvocationTicks, Observed, check
from longstep_kit.ops.steer import RunNotRunningError, Steering
from longstep_kit.local.runner import RunOptions, start_input
from longstep_kit.local.scenario import load_scenario
from longstep import keys
from longstep.errors import ApprovalAlreadyDecidedError, ApprovalExpiredError
from longstep import steering
from longstep.humans import signals
from longstep.humans.decisions import decide
from longstep.humans.requests import pending_approvals
from longstep.humans.table import ApprovalTable, Decision
from longstep.store import CheckpointStore
from tests.local.conftest import SCENARIOS, Background
from tests.local.test_humans_and_waits import _wait_until

RUN = "history"
FOUR = SCENARIOS.parents[1] / "tests" / "fixtures" / "wait_four.json"


def _table(stack) -> ApprovalTable:
    return ApprovalTable(stack.outputs["ApprovalsTableName"], stack.client("dynamodb"))


def _store(stack) -> CheckpointStore:
    return CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))


def _ended(stack, run_id: str, report: dict) -> str:
    """How the run ended: the execution's status, or STOPPED for one a stop ended at a boundary."""
    final = _store(stack).get(run_id, keys.FINAL_RECORD) or {}
    output = final.get("output")
    output = json.loads(output) if isinstance(output, str) else output or {}
    return str(output.get("status") or report["status"]) if report["status"] == "SUCCEEDED" else report["status"]


def _stopper(history: History, stack, run_id: str, reason: str, after: threading.Event | None = None) -> None:
    """A client stopping the run (``longstep stop``), once ``after`` is set (another client's first
    op came back: the stop lands in the middle of the race); refused when the run is over."""
    if after is not None:
        after.wait(30)
    steer = Steering(_store(stack), stack.client("stepfunctions"), stack.state_machine_arn, _table(stack), who="stopper")
    history.call("stopper", "stop", run_id, reason, lambda: steer.stop(run_id, reason), (RunNotRunningError,))


def _outbox_keys(stack, run_id: str = RUN) -> list[str]:
    from agents import triage_world
    from longstep_kit.local.world import agent_context

    with agent_context(stack, "triage"):
        rows = triage_world.scan(triage_world.outbox())
    return [r["idempotency_key"]["S"] for r in rows if r["run_id"]["S"] == run_id]


def _run(stack, decide_all, execution: str, run_id: str = RUN):
    """One run of approvals.json with the humans played by ``decide_all(pending)``; its report."""
    stack.reset_data()
    scenario = load_scenario(SCENARIOS / "approvals.json")
    with stack.clock.held():  # time stands still while the humans decide
        background = Background(stack, scenario, RunOptions(run_id=run_id, execution_name=execution, approve="external", timeout_seconds=60))
        _wait_until("four pending approvals", lambda: len(pending_approvals(_table(stack), run_id)) == 4)
        decide_all(sorted(pending_approvals(_table(stack), run_id), key=lambda a: a["call"])[:3])
    return background.result()  # the fourth request times out on the virtual clock


def _decision(kind: str) -> Decision:
    return Decision(decision=kind, reason="not now" if kind == "reject" else None, approver=f"{kind}-client")


def _approve(history: History, stack, kind: str, approval_id: str) -> None:
    """An approver client deciding ``kind``: refused when another decision (or the stop's) won."""
    sfn = stack.client("stepfunctions")
    refused = (ApprovalAlreadyDecidedError, ApprovalExpiredError)
    history.call(f"{kind}-client", "decide", approval_id, kind, lambda: decide(_table(stack), sfn, approval_id, _decision(kind)), refused)


def test_concurrent_clients_keep_every_rule(stack):
    history, sfn = History(), stack.client("stepfunctions")
    scenario = load_scenario(SCENARIOS / "approvals.json")

    def race(pending):
        def approver(kind, approval_id):
            _approve(history, stack, kind, approval_id)

        def starter(n):
            payload = json.dumps(start_input(stack, scenario, RUN))
            history.call(
                f"starter-{n}",
                "start",
                RUN,
                None,
                lambda: sfn.start_execution(stateMachineArn=stack.alias_arn, name="history-concurrent", input=payload),
                (sfn.exceptions.ExecutionAlreadyExists,),
            )

        threads = [threading.Thread(target=approver, args=(k, a["approval_id"])) for a in pending for k in ("approve", "reject")]
        threads += [threading.Thread(target=starter, args=(n,)) for n in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not any(t.is_alive() for t in threads)

    report = _run(stack, race, "history-concurrent")
    assert report["status"] == "SUCCEEDED"
    table = _table(stack)
    applied = [
        (a["approval_id"], a["status"].replace("approved", "approve").replace("rejected", "reject")) for a in report["approvals"] if a["call"] < 3
    ]
    observed = Observed(effect_keys=_outbox_keys(stack), decisions=applied, transcript=report["transcript_sha256"])
    winners = {approval: decision for approval, decision in applied}
    assert len(winners) == 3 and all(table.get(a)["status"] in ("approved", "rejected") for a in winners)
    # StartExecution with a running execution's name and input is idempotent: the same execution
    # (https://docs.aws.amazon.com/step-functions/latest/apireference/API_StartExecution.html).
    starts = [op for op in history.ops if op.kind == "start"]
    assert [op.outcome for op in starts] == [OK, OK] and len({op.answer["executionArn"] for op in starts}) == 1
    assert report["executions"] == 1
    assert sorted(op.outcome for op in history.ops if op.kind == "decide") == [OK] * 3 + [REFUSED] * 3

    def serial(pending):  # the decisions that won, one at a time
        for request in pending:
            decide(_table(stack), sfn, request["approval_id"], _decision(winners_by_call[request["call"]]))

    winners_by_call = {a["call"]: winners[a["approval_id"]] for a in report["approvals"] if a["call"] < 3}
    observed.serial_transcript = _run(stack, serial, "history-serial")["transcript_sha256"]
    assert check(history, observed) == []


def _signal_run(stack, send_all, execution: str, observe=None) -> tuple[dict, list[tuple[str, object]], list[tuple[int, str]]]:
    """One run of wait_four.json with its signals and messages sent by ``send_all(store, sfn,
    parked)`` (``parked(n)`` waits until the run's n-th wait has parked); the report, the signals
    its waits took and the messages its model turns took, in turn order. ``observe``: a
    dispatcher hook for the run's invocations."""
    stack.reset_data()
    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
    first = len(stack.dispatcher.invocations)

    def parked(n: int) -> None:
        waits = lambda: [i for i in stack.dispatcher.invocations[first:] if i.task == "wait_for_event" and i.error is None]  # noqa: E731
        _wait_until(f"wait {n} parked", lambda: len(waits()) > n)

    if observe is not None:
        stack.dispatcher.before_invoke.append(observe)
    try:
        with stack.clock.held():  # no wait times out while the senders send
            background = Background(
                stack, load_scenario(FOUR), RunOptions(run_id="signals", execution_name=execution, approve="external", timeout_seconds=60)
            )
            send_all(store, stack.client("stepfunctions"), parked)
        report = background.result()
    finally:
        if observe is not None:
            stack.dispatcher.before_invoke.remove(observe)
    steps = store.steps("signals")
    taken = [("ci_finished", s.result["content"].get("payload")) for s in steps if s.kind == "tool" and s.result["status"] == "success"]
    messages = [(int(s.sk.split("#")[1]), text) for s in steps if s.kind == "model" for text in s.result.get("steering") or []]
    return report, taken, messages


def test_concurrent_signals_and_messages_are_each_taken_once_in_the_order_sent(stack):
    history = History()
    payloads = {"a": [{"a": 1}, {"a": 2}], "b": [{"b": 1}], "c": [{"c": 1}]}
    texts = {"m": ["check the flaky test first", "then the deploy"], "n": ["ping the on-call"]}

    def race(store, sfn, parked):
        parked(0)  # the first wait is parked: every message goes to a later model turn

        def sender(name):
            for payload in payloads[name]:  # one after the other: the second must be taken after the first
                history.call(name, "signal", "ci_finished", payload, lambda p=payload: signals.deliver(store, sfn, "signals", "ci_finished", p))

        def steerer(name):
            for text in texts[name]:
                history.call(name, "steer", "signals", text, lambda t=text: steering.send(store, "signals", t, sender=name))

        threads = [threading.Thread(target=sender, args=(n,)) for n in payloads] + [threading.Thread(target=steerer, args=(n,)) for n in texts]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not any(t.is_alive() for t in threads)

    report, taken, messages = _signal_run(stack, race, "signals-concurrent")
    assert report["status"] == "SUCCEEDED"
    assert sorted(map(json.dumps, (p for _, p in taken))) == sorted(json.dumps(p) for ps in payloads.values() for p in ps)

    def serial(store, sfn, parked):  # the signals in the order they were taken, the messages before the turn that took them
        for wait, (event, payload) in enumerate(taken):
            parked(wait)
            for turn, text in messages:
                if turn == wait + 1:
                    steering.send(store, "signals", text)
            signals.deliver(store, sfn, "signals", event, payload)

    serial_report, serial_taken, serial_messages = _signal_run(stack, serial, "signals-serial")
    assert (serial_taken, serial_messages) == (taken, messages)
    observed = Observed(
        deliveries=taken, messages=messages, transcript=report["transcript_sha256"], serial_transcript=serial_report["transcript_sha256"]
    )
    assert check(history, observed) == []


def test_a_stop_racing_the_approvers_leaves_no_effect_after_it_and_the_run_stopped(stack):
    history = History()
    run_id = "history-stop"  # its execution's name too: a stop finds the run's execution by it
    ticks = InvocationTicks(history, run_id)

    first = threading.Event()

    def race(pending):
        def approver(kind, approval_id):
            _approve(history, stack, kind, approval_id)
            first.set()

        threads = [threading.Thread(target=approver, args=(k, a["approval_id"])) for a in pending for k in ("approve", "reject")]
        threads.append(threading.Thread(target=_stopper, args=(history, stack, run_id, "wrong audience", first)))
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not any(t.is_alive() for t in threads)

    stack.dispatcher.before_invoke.append(ticks)
    try:
        report = _run(stack, race, run_id, run_id)
    finally:
        stack.dispatcher.before_invoke.remove(ticks)
    (stop,) = [op for op in history.ops if op.kind == "stop"]
    assert stop.outcome == OK, stop.answer  # the run waited on its approvals: it was running
    decided = {"approved": "approve", "rejected": "reject", "edited": "edit"}
    observed = Observed(
        effect_keys=_outbox_keys(stack, run_id),
        decisions=[(a["approval_id"], decided[a["status"]]) for a in report["approvals"] if a["status"] in decided],
        acted=ticks.acted(_store(stack).steps(run_id)),
        status=_ended(stack, run_id, report),
        ended_tick=ticks.last_turn,
    )
    assert observed.status == "STOPPED", report  # the stop came before the turn after the approvals
    assert check(history, observed) == []
    # What the stop beat was cancelled: no email was sent without an approval that won.
    approved = {a for a, d in observed.decisions if d == "approve"}
    assert len(observed.effect_keys) <= len(approved)


def test_a_stop_racing_signals_and_messages_cuts_the_run_short_and_nothing_acts_after_it(stack):
    history = History()
    ticks = InvocationTicks(history, "signals")
    payloads = {"a": [{"a": 1}, {"a": 2}], "b": [{"b": 1}], "c": [{"c": 1}]}

    first = threading.Event()

    def race(store, sfn, parked):
        parked(0)

        def sender(name):
            for payload in payloads[name]:
                history.call(name, "signal", "ci_finished", payload, lambda p=payload: signals.deliver(store, sfn, "signals", "ci_finished", p))
                first.set()

        def steerer():
            for text in ("check the flaky test first", "then the deploy"):
                history.call("m", "steer", "signals", text, lambda t=text: steering.send(store, "signals", t, sender="m"))

        threads = [threading.Thread(target=sender, args=(n,)) for n in payloads] + [threading.Thread(target=steerer)]
        threads.append(threading.Thread(target=_stopper, args=(history, stack, "signals", "enough CI", first)))
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not any(t.is_alive() for t in threads)

    report, taken, messages = _signal_run(stack, race, "signals", observe=ticks)  # the run's name: a stop finds it
    observed = Observed(
        deliveries=taken,
        messages=messages,
        acted=ticks.acted(_store(stack).steps("signals")),
        status=_ended(stack, "signals", report),
        ended_tick=ticks.last_turn,
    )
    assert check(history, observed) == []
    (stop,) = [op for op in history.ops if op.kind == "stop"]
    if stop.outcome == OK and observed.status == "STOPPED":  # the stop came before the run's last turn
        cancelled = [s for s in _store(stack).steps("signals") if s.kind == "tool" and s.result["status"] != "success"]
        assert len(taken) + len(cancelled) <= 4 and all(s.result["content"].get("cancelled") for s in cancelled)


def _history(*ops):
    history = History()
    for client, kind, key, value, outcome in ops:
        history.call(client, kind, key, value, (lambda o=outcome: o) if outcome == OK else _refuse, (ValueError,))
    return history


def _refuse():
    raise ValueError("no")


GOOD = dict(
    effect_keys=["r:0:0", "r:0:1"],
    deliveries=[("ci", {"b": 1}), ("ci", {"b": 2})],
    decisions=[("a1", "approve")],
    messages=[(1, "hi"), (2, "bye")],
    transcript="t",
    serial_transcript="t",
)


@pytest.mark.parametrize(
    ("changes", "complaint"),
    [
        ({"effect_keys": ["r:0:0", "r:0:0"]}, "effect r:0:0 happened 2 times"),
        ({"deliveries": [("ci", {"b": 1}), ("ci", {"b": 1}), ("ci", {"b": 2})]}, 'signal ci {"b": 1} delivered 2 times'),
        ({"deliveries": [("ci", {"b": 2}), ("ci", {"b": 1})]}, 'delivered before {"b": 1}, sent after it'),
        ({"decisions": [("a1", "approve"), ("a1", "reject")]}, "approval a1 decided 2 times"),
        ({"decisions": [("a1", "reject")]}, "approval a1: reject applied, but the client told it won said approve"),
        ({"transcript": "u"}, "differs from the serial run's"),
        ({"messages": [(1, "hi"), (2, "hi"), (2, "bye")]}, "message 'hi' taken 2 times"),
        ({"messages": [(1, "bye"), (2, "hi")]}, "message 'bye' taken before 'hi', sent after it"),
        ({"messages": [(1, "hi")]}, "message 'bye' was acknowledged and never taken"),
    ],
)
def test_the_checker_catches_a_fabricated_violation(changes, complaint):
    history = _history(
        ("s", "signal", "ci", {"b": 1}, OK),
        ("s", "signal", "ci", {"b": 2}, OK),
        ("x", "decide", "a1", "approve", OK),
        ("y", "decide", "a1", "reject", REFUSED),
        ("u", "steer", "r", "hi", OK),
        ("u", "steer", "r", "bye", OK),
    )
    assert check(history, Observed(**GOOD)) == []
    problems = check(history, Observed(**{**GOOD, **changes}))
    assert any(complaint in p for p in problems), problems


def test_two_clients_told_they_won_the_same_approval_is_a_violation():
    history = _history(("x", "decide", "a1", "approve", OK), ("y", "decide", "a1", "reject", OK))
    assert "approval a1: 2 clients were told their decision won (x, y)" in check(history, Observed(**GOOD))


def test_concurrent_signals_may_arrive_in_either_order():
    history = History()
    history.ops = []  # two sends whose invocations overlap: neither completed before the other began
    from longstep_kit.local.history import Op

    history.ops = [
        Op("a", "signal", "ci", {"b": 1}, invoked=0, completed=3, outcome=OK),
        Op("b", "signal", "ci", {"b": 2}, invoked=1, completed=2, outcome=OK),
    ]
    assert check(history, Observed(**{**GOOD, "deliveries": [("ci", {"b": 2}), ("ci", {"b": 1})]})) == []


@pytest.mark.parametrize(
    ("changes", "complaint"),
    [
        ({"acted": [(1, "turn 0"), (9, "call 1:0")]}, "call 1:0 acted in an invocation started at 9, after the stop was acknowledged at"),
        ({"status": "SUCCEEDED", "ended_tick": 9}, "the run ended SUCCEEDED though z's stop was acknowledged"),
        ({"status": "SUCCEEDED"}, "the run ended SUCCEEDED though z's stop was acknowledged"),
    ],
)
def test_the_checker_catches_what_acts_after_a_stop(changes, complaint):
    history = _history(("u", "steer", "r", "hi", OK), ("z", "stop", "r", "enough", OK), ("y", "stop", "r", "again", REFUSED))
    stopped = {**GOOD, "messages": [], "acted": [(1, "turn 0")], "status": "STOPPED", "ended_tick": 9}
    assert check(history, Observed(**stopped)) == []  # a message acknowledged before the stop may stay untaken
    problems = check(history, Observed(**{**stopped, **changes}))
    assert any(complaint in p for p in problems), problems


def test_a_run_whose_last_turn_began_before_the_stop_may_end_as_it_would_have():
    history = _history(("z", "stop", "r", "enough", OK))
    assert check(history, Observed(**{**GOOD, "messages": [], "status": "SUCCEEDED", "ended_tick": 0})) == []
