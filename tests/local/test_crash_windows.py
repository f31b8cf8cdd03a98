"""Small windows between two writes, each closed: a signal handed to a wait whose entry was not
marked consumed (the sender crashed in between, or the response of its ``SendTaskSuccess`` was
lost and the SDK's retry heard ``TaskTimedOut``) must not reach a second wait on the same event.

``tests/fixtures/wait_twice.json`` waits on ``ci_finished`` twice, with one signal sent before the
first wait: the first wait takes it, the second times out after its hour. And two waits of one turn
on one event (``tests/fixtures/wait_parallel.json``) each keep their place in its head record.
"""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

import pytest

from longstep_kit.local.dispatch import Crash
from longstep_kit.local.faults import parse_fault
from longstep_kit.local.runner import RunOptions, run_scenario
from longstep_kit.local.scenario import load_scenario
from longstep import keys
from longstep.humans import signals
from longstep.store import CheckpointStore
from tests.local.conftest import Background
from tests.local.test_humans_and_waits import _wait_until

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TWICE = FIXTURES / "wait_twice.json"
_names = itertools.count()


def _waits(stack, scenario, *specs):
    stack.reset_data()
    report = run_scenario(
        stack,
        scenario,
        RunOptions(run_id="twice", execution_name=f"twice-{next(_names)}", faults=[parse_fault(s) for s in specs], timeout_seconds=60),
    )
    assert report["status"] == "SUCCEEDED", report.get("cause")
    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
    return report, [s.result["content"] for s in store.steps("twice") if s.kind == "tool"]


ONCE = [
    {"waited": "event", "event": "ci_finished", "payload": {"build": 1}},
    {"waited": "event", "event": "ci_finished", "timed_out": True},
]


@pytest.fixture(scope="module")
def twice():
    return load_scenario(TWICE)


def test_one_signal_reaches_one_of_two_waits(stack, twice):
    assert _waits(stack, twice)[1] == ONCE


def test_a_lost_response_to_the_waits_send_task_success(stack, twice):
    # The first SendTaskSuccess of the run is the first wait's, handed the buffered signal.
    report, waits = _waits(stack, twice, "lost_ack.SendTaskSuccess@0")
    assert [f["point"] for f in report["faults_injected"]] == ["lost_ack.SendTaskSuccess"]
    assert waits == ONCE  # it failed the run before (TaskTimedOut raised out of WaitForEvent)


def test_a_crash_after_send_task_success_before_the_entry_is_consumed(stack, twice, monkeypatch):
    died = []
    real = signals._settle

    def dies_first(store, run_id, entry, claim, consumed):  # the invocation dies once, right after SendTaskSuccess
        if consumed and not died:
            died.append(entry["sk"])
            raise Crash("killed after SendTaskSuccess")
        return real(store, run_id, entry, claim, consumed)

    monkeypatch.setattr(signals, "_settle", dies_first)
    _, waits = _waits(stack, twice)
    assert died and waits == ONCE  # the second wait got the same signal again before


def test_parallel_waits_on_one_event_each_get_their_signal(stack):
    stack.reset_data()
    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
    first = len(stack.dispatcher.invocations)
    with stack.clock.held():  # their hour does not pass while the test sends
        background = Background(stack, load_scenario(FIXTURES / "wait_parallel.json"), RunOptions(run_id="parallel", approve="external"))

        def parked():
            return [i for i in stack.dispatcher.invocations[first:] if i.task == "wait_for_event" and (i.result or {}).get("status") == "waiting"]

        _wait_until("both waits parked", lambda: len(parked()) == 2)
        sfn = stack.client("stepfunctions")
        # The second park replaced the first waiter before: build 1 stayed buffered, its wait timed out.
        assert signals.deliver(store, sfn, "parallel", "ci_finished", {"build": 1}) == signals.DELIVERED
        assert signals.deliver(store, sfn, "parallel", "ci_finished", {"build": 2}) == signals.DELIVERED
    assert background.result()["status"] == "SUCCEEDED"
    waits = [s.result["content"] for s in store.steps("parallel") if s.kind == "tool"]
    assert waits == [{"waited": "event", "event": "ci_finished", "payload": {"build": b}} for b in (1, 2)]


def test_a_lost_response_to_one_of_two_parallel_waits_on_one_event(stack):
    """Two waits of one turn on one event, both taking any signal; the response to the first
    waiter's SendTaskSuccess is lost, so the sender hears TaskTimedOut, puts the signal back and
    hands it to the second waiter too. Both calls took build 1 before (and build 2 stayed
    buffered); now the call that marks it second parks again (SignalTakenError, caught back to
    WaitForEvent) and takes build 2."""
    stack.reset_data()
    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
    first = len(stack.dispatcher.invocations)
    options = RunOptions(run_id="anyof", approve="external", faults=[parse_fault("lost_ack.SendTaskSuccess@0")])
    sent = threading.Event()

    def slow_calls(invocation):  # the answered calls start after the sender's retry came back
        if invocation.task == "call_tool":
            assert sent.wait(30), "the first signal was never sent"

    stack.dispatcher.before_invoke.append(slow_calls)
    try:
        with stack.clock.held():  # their hour does not pass while the test sends
            background = Background(stack, load_scenario(FIXTURES / "wait_parallel_any.json"), options)

            def parked():
                return [i for i in stack.dispatcher.invocations[first:] if i.task == "wait_for_event" and (i.result or {}).get("status") == "waiting"]

            _wait_until("both waits parked", lambda: len(parked()) == 2)
            sfn = stack.client("stepfunctions")
            signals.deliver(store, sfn, "anyof", "ci_finished", {"build": 1})
            sent.set()
            signals.deliver(store, sfn, "anyof", "ci_finished", {"build": 2})
            report = background.result()
    finally:
        sent.set()
        stack.dispatcher.before_invoke.remove(slow_calls)
    assert report["status"] == "SUCCEEDED", report.get("cause")
    assert [f["point"] for f in report["faults_injected"]] == ["lost_ack.SendTaskSuccess"]
    waits = [s.result["content"] for s in store.steps("anyof") if s.kind == "tool"]
    assert sorted(w["payload"]["build"] for w in waits) == [1, 2], waits
    entries = store.query_prefix("anyof", keys.signal_key("ci_finished") + "#")
    assert [e["status"] for e in entries] == [signals.CONSUMED] * 2


def test_the_local_driver_answers_an_escalation_whose_execution_stopped(stack):
    """The driver reads a pending escalation, the execution stops, then it answers: Step Functions
    says the token is closed (TaskTimedOut). That raised out of the driver (the local run
    crashed); now the answer is kept, nothing resumes, and a resumed run asks again."""
    from longstep_kit.local.answers import AgentSession, answer_humans
    from longstep_kit.local.faults import Fault
    from longstep_kit.testing.wait import wait_execution
    from longstep.humans import escalations, waiting

    from tests.local.test_humans_and_waits import ONE_TURN

    stack.reset_data()
    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
    sfn = stack.client("stepfunctions")
    with stack.clock.held():  # the escalation's timeout does not fire meanwhile
        background = Background(
            stack, ONE_TURN, RunOptions(run_id="closed", execution_name="closed-1", approve="external", faults=[Fault("permanent", 0)])
        )
        _wait_until("the escalation", lambda: escalations.pending_escalations(store, "closed"))
        execution = sfn.list_executions(stateMachineArn=stack.state_machine_arn, statusFilter="RUNNING")["executions"]
        (arn,) = [e["executionArn"] for e in execution if e["name"] == "closed-1"]
        sfn.stop_execution(executionArn=arn, error="Operator", cause="stopped while a human was asked")
        assert wait_execution(sfn, arn, 30)["status"] == "ABORTED"
        lines: list[str] = []
        session = AgentSession(stack, ONE_TURN, "closed", RunOptions(approve="auto", emit=lines.append), execution_name="closed-1")
        answer_humans(session, sfn)  # raised botocore's ClientError (TaskTimedOut) before
    assert background.result()["status"] == "ABORTED"
    assert len(lines) == 1 and "not answered" in lines[0] and "its wait is over" in lines[0]
    record = store.get("closed", keys.escalation_key(0, escalations.MODEL_CALL))
    assert record["status"] == waiting.CLOSED and "task_token" not in record and record.get("late_answer")
