"""Concurrency keys and the shared model rate limit on the local stack: a key holds at its limit
(never over, never idle while a run of it waits), a waiting run invokes no Lambda until its turn,
model calls stay under the quota per virtual minute with none throttled, and lost responses of the
slots' transactions and wake-ups leave no duplicate and no leaked slot."""

from __future__ import annotations

import json
import threading

import pytest

from longstep.concurrency import Slots
from longstep.fleet import FleetSettings
from longstep.settings import DEFAULT_MODEL_ID
from longstep_kit.cli import main
from longstep_kit.local.faults import Fault, FaultInjector
from longstep_kit.local.runner import start_input
from longstep_kit.local.scenario import Scenario
from longstep_kit.local.stack import LocalStack
from longstep_kit.testing.wait import wait_execution, wait_until
from tests.fixtures.agents import fleet
from tests.local.conftest import holds_released

LIMIT = 2
RPM = 12
FLEET = {
    "concurrency": {"key": "tenant", "limit": LIMIT},
    "rate_limits": {DEFAULT_MODEL_ID: {"requests_per_minute": RPM, "tokens_per_minute": 1_000_000, "tokens_per_call": 100, "burst_seconds": 5}},
}


@pytest.fixture(scope="module")
def stack():
    from longstep_kit.project import agent_catalog

    context = {"longstep": {"agents": {**agent_catalog().references, "fleet": "tests.fixtures.agents.fleet:build"}, "fleet": FLEET}}
    with LocalStack(context=context) as local:
        yield local


@pytest.fixture(autouse=True)
def _no_hold_outlives_its_test(stack):
    with holds_released(stack.clock):
        yield


class Watch:
    """Every fleet and model invocation, in the order they end, with the virtual time; and, at each
    moment no fleet invocation is in flight, each key's slots (the only writers of them are done)."""

    def __init__(self, stack) -> None:
        self.stack = stack
        self.lock = threading.Lock()
        self.in_flight = 0
        self.ended: list[tuple[str, str, dict, float]] = []  # (run, task, result, virtual time)
        self.quiet_states: list[dict] = []
        self.slots = Slots(stack.client("dynamodb"), stack.outputs["CheckpointTableName"], stack.client("stepfunctions"), LIMIT)

    def before(self, inv) -> None:
        if inv.task == "fleet_gate":
            with self.lock:
                self.in_flight += 1

    def after(self, inv) -> None:
        run = (inv.event or {}).get("run_id") or (inv.event.get("item") or {}).get("run_id") or ""
        with self.lock:
            self.ended.append((run, inv.task, inv.result if isinstance(inv.result, dict) else {"error": inv.error}, self.stack.clock.time()))
            if inv.task == "fleet_gate":
                self.in_flight -= 1
                if self.in_flight == 0:
                    self.quiet_states.extend(self.slots.state(t) for t in ("acme", "globex"))

    def __enter__(self) -> "Watch":
        self.stack.dispatcher.before_invoke.append(self.before)
        self.stack.dispatcher.after_invoke.append(self.after)
        return self

    def __exit__(self, *exc) -> None:
        self.stack.dispatcher.before_invoke.remove(self.before)
        self.stack.dispatcher.after_invoke.remove(self.after)


def _start(stack, runs: dict[str, str]) -> dict[str, str]:
    sfn = stack.client("stepfunctions")
    arns = {}
    for run_id, tenant in runs.items():
        scenario = Scenario.model_validate(fleet.scenario(run_id, "us", False))
        payload = {**start_input(stack, scenario, run_id), "tenant": tenant}
        arns[run_id] = sfn.start_execution(stateMachineArn=stack.alias_arn, name=run_id, input=json.dumps(payload))["executionArn"]
    return arns


def _no_slot_held(stack) -> None:
    slots = Watch(stack).slots
    for tenant in ("acme", "globex"):
        state = wait_until(f"{tenant}'s slots to be given back", lambda t=tenant: (s := slots.state(t))["running"] == 0 and s, timeout=30)
        assert state == {"running": 0, "limit": LIMIT, "holders": [], "waiters": []}


def test_a_key_holds_at_its_limit_and_the_model_calls_stay_under_the_quota(stack):
    runs = {f"gate-{i:02d}": ("acme" if i < 8 else "globex") for i in range(12)}
    fleet.EFFECTS.clear()
    with Watch(stack) as watch:
        arns = _start(stack, runs)
        ended = {run_id: wait_execution(stack.client("stepfunctions"), arn, 300)["status"] for run_id, arn in arns.items()}
    assert set(ended.values()) == {"SUCCEEDED"}
    # Never over, never idle while a run of the key waits (at every quiet moment of the slots).
    assert watch.quiet_states and all(s["running"] <= LIMIT and len(s["holders"]) == s["running"] for s in watch.quiet_states)
    assert all(s["running"] == LIMIT for s in watch.quiet_states if s["waiters"])
    assert any(s["waiters"] for s in watch.quiet_states)  # the limit did bind
    # A queued run invokes nothing while it waits: each run, queued or not, made the same
    # invocations (one acquire, no polling), and a queued one was woken by another's.
    woken_by = {}
    for run, task, result, _ in watch.ended:
        for woken in result.get("woke", []):
            woken_by.setdefault(woken, run)
    queued = {run for run, task, result, _ in watch.ended if task == "fleet_gate" and result.get("status") == "queued"}
    assert queued and all(woken_by[run] != run for run in queued)
    made = {run: sorted(task for r, task, *_ in watch.ended if r == run) for run in runs}
    assert len({tuple(tasks) for tasks in made.values()}) == 1, made
    # Each run was granted a slot once; every effect happened once.
    assert sorted(woken_by) == sorted(runs)
    assert set(fleet.EFFECTS.values()) == {1} and len(fleet.EFFECTS) == len(runs)
    # Model calls: two a run, none failed, at most RPM in any 60 virtual seconds.
    calls = [t for run, task, result, t in watch.ended if task == "model_turn"]
    assert len(calls) == 2 * len(runs)
    assert not [r for run, task, r, _ in watch.ended if task == "model_turn" and "error" in r and r["error"]]
    assert max(sum(1 for c in calls if start <= c < start + 60) for start in calls) <= RPM
    assert max(calls) - min(calls) >= 60  # the quota did bind: 24 calls took over a minute
    assert any(r.get("wait_seconds", 0) > 0 for run, task, r, _ in watch.ended if task == "fleet_gate")
    # Turn 1's draw corrected the bucket with turn 0's recorded usage (under FleetGate's role: a
    # transaction with the run record's count), once a run.
    from longstep import keys
    from longstep.rate_limit import COUNTED
    from longstep.store import CheckpointStore

    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
    assert {run_id: store.get(run_id, keys.RUN_RECORD).get(COUNTED) for run_id in runs} == {run_id: 1 for run_id in runs}
    _no_slot_held(stack)


def test_a_live_limit_change_and_a_stop_while_waiting_or_holding(stack):
    sfn = stack.client("stepfunctions")
    slots = Watch(stack).slots
    target = ["--stack", stack.assembly.stack_name, "--region", "us-east-1"]
    stack.clock.hold()
    try:
        arns = _start(stack, {f"stop-{i}": "acme" for i in range(5)})
        wait_until("two holders and three waiters", lambda: (s := slots.state("acme"))["running"] == 2 and len(s["waiters"]) == 3, timeout=60)
        # The limit changed live (the CLI): the head waiter is woken at once, the others still wait.
        assert main(["fleet", "limit", "acme", "3", *target]) == 0
        state = wait_until("a third holder", lambda: (s := slots.state("acme"))["running"] == 3 and s, timeout=30)
        assert state["limit"] == 3 and len(state["waiters"]) == 2
        assert main(["fleet", "limit", "acme", "many", *target]) == 2
        holder, (waiter, stopped) = state["holders"][0], state["waiters"]
        sfn.stop_execution(executionArn=arns[waiter], error="Operator", cause="stopped while waiting")
        sfn.stop_execution(executionArn=arns[holder], error="Operator", cause="stopped while holding")
        # A durable stop of a waiting run wakes it without a slot: its next model turn ends it.
        assert main(["stop", stopped, *target]) == 0
    finally:
        stack.clock.release()
    described = {run_id: wait_execution(sfn, arn, 120) for run_id, arn in arns.items()}
    ended = {run_id: d["status"] for run_id, d in described.items()}
    assert ended[waiter] == ended[holder] == "ABORTED"
    assert json.loads(described[stopped]["output"])["status"] == "STOPPED"
    assert sorted(s for r, s in ended.items() if r not in (waiter, holder)) == ["SUCCEEDED"] * 3
    assert main(["fleet", "limit", "acme", str(LIMIT), *target]) == 0
    _no_slot_held(stack)


def test_a_holder_whose_end_event_is_lost_gives_its_slot_to_a_waiter(stack, monkeypatch):
    from moto.events.models import Rule

    sfn = stack.client("stepfunctions")
    slots = Watch(stack).slots
    deliver, lost = Rule.send_to_targets, []

    def send_to_targets(rule, event, *args, **kwargs):
        if event.get("detail", {}).get("executionArn") in lost:
            return None  # best effort: this one never arrives
        return deliver(rule, event, *args, **kwargs)

    monkeypatch.setattr(Rule, "send_to_targets", send_to_targets)
    stack.clock.hold()
    try:
        arns = _start(stack, {f"lost-{i}": "acme" for i in range(4)})
        state = wait_until(
            "two holders and two waiters", lambda: (s := slots.state("acme"))["running"] == 2 and len(s["waiters"]) == 2 and s, timeout=60
        )
        holder = state["holders"][0]
        lost.append(arns[holder])
        sfn.stop_execution(executionArn=arns[holder], error="Operator", cause="stopped while holding")
    finally:
        stack.clock.release()
    ended = {run_id: wait_execution(sfn, arn, 120)["status"] for run_id, arn in arns.items()}
    assert ended.pop(holder) == "ABORTED" and set(ended.values()) == {"SUCCEEDED"}
    # No event freed the stopped holder's slot: a pump that found the key full with a run waiting did.
    assert not [i for i in stack.dispatcher.invocations if (i.event.get("detail") or {}).get("executionArn") == arns[holder]]
    _no_slot_held(stack)
    # FleetGate's role (as the local IAM enforcement applies it) reads its state machine's
    # executions, and nothing more: another machine's execution and stopping one are denied.
    from botocore.exceptions import ClientError

    from longstep import clients
    from longstep_kit.local import iam

    (role,) = {
        f["Role"] for f in stack.client("lambda").list_functions()["Functions"] if f["Handler"] == "longstep_functions.fleet_gate.lambda_handler"
    }
    with iam.acting_as(role):
        states = clients.client("stepfunctions")
        assert states.describe_execution(executionArn=arns[holder])["status"] == "ABORTED"
        other = arns[holder].replace(":execution:", ":execution:Other")
        for call in (lambda: states.describe_execution(executionArn=other), lambda: states.stop_execution(executionArn=arns[holder])):
            with pytest.raises(ClientError) as denied:
                call()
            assert denied.value.response["Error"]["Code"] == "AccessDeniedException"


def test_a_budget_ask_of_a_run_aborted_meanwhile_leaves_the_inbox(stack):
    from longstep.humans.requests import list_approvals
    from longstep.humans.table import ApprovalTable

    sfn = stack.client("stepfunctions")
    table = ApprovalTable(stack.outputs["ApprovalsTableName"], stack.client("dynamodb"))
    turns = {str(t): {"text": f"Turn {t}.", "tool_calls": [{"name": "lookup", "input": {"region": "us"}}]} for t in range(8)}
    scenario = Scenario.model_validate({"name": "budget", "input": {"goal": "Check.", "agent": "fleet", "max_turns": 20}, "turns": turns})
    payload = {**start_input(stack, scenario, "aborted-ask"), "tenant": "initech", "budget": {"tokens": 100_000, "ask_at": 0.001}}
    started: dict[str, str] = {}
    aborted: list[str] = []

    def abort_once_asked(inv) -> None:  # the operator aborts the run as soon as its ask is listed
        if started and not aborted and inv.task == "model_turn" and list_approvals(table, "pending", "aborted-ask"):
            aborted.append(started["arn"])
            sfn.stop_execution(executionArn=started["arn"], error="Operator", cause="aborted while its budget ask waits")

    stack.dispatcher.after_invoke.append(abort_once_asked)
    try:
        started["arn"] = sfn.start_execution(stateMachineArn=stack.alias_arn, name="aborted-ask", input=json.dumps(payload))["executionArn"]
        assert wait_execution(sfn, started["arn"], 120)["status"] == "ABORTED"
    finally:
        stack.dispatcher.after_invoke.remove(abort_once_asked)
    assert aborted
    # No Finish ran: the execution's end event, through FleetGate, closed the ask.
    wait_until("the ask to leave the inbox", lambda: not list_approvals(table, "pending", "aborted-ask"), timeout=30)
    assert [r["status"] for r in list_approvals(table, "expired", "aborted-ask")] == ["expired"]


def test_lost_responses_around_acquire_release_and_wake_leave_no_duplicate_and_no_leaked_slot(stack):
    plan = [
        Fault("lost_ack.TransactWriteItems", 0),
        Fault("lost_ack.TransactWriteItems", 3),
        Fault("lost_ack.TransactWriteItems", 7),
        Fault("lost_ack.SendTaskSuccess", 1),
        Fault("lost_ack.SendTaskSuccess", 4),
    ]
    from longstep.steps import RecordLease

    injector = FaultInjector(plan=plan, lock=RecordLease)
    fleet.EFFECTS.clear()
    injector.install()
    try:
        arns = _start(stack, {f"crash-{i}": "globex" for i in range(6)})
        ended = {run_id: wait_execution(stack.client("stepfunctions"), arn, 300)["status"] for run_id, arn in arns.items()}
    finally:
        injector.uninstall()
    assert len(injector.injected) == len(plan), injector.unfired()
    assert set(ended.values()) == {"SUCCEEDED"}
    assert set(fleet.EFFECTS.values()) == {1} and len(fleet.EFFECTS) == 6
    _no_slot_held(stack)


def test_the_settings_reach_the_function():
    assert FleetSettings.model_validate(FLEET).concurrency.limit == LIMIT
