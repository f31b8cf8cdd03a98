"""StopExecution at any moment of a run, as in AWS: right after StartExecution, and while each task
state of the definition runs (a dispatcher hook stops the execution as the state's function is
invoked). Each time the execution ends ABORTED, no function of the run is invoked after the stop
(the invocation that was running finishes its step, as a Lambda invocation does in AWS), and
resuming the run gives the clean run's transcript with no duplicate effect: nothing was left
half-written.

AWS: https://docs.aws.amazon.com/step-functions/latest/apireference/API_StopExecution.html
(a running execution stops, status ABORTED).
"""

from __future__ import annotations

from longstep import steering
from longstep.settings import DEFAULT_MODEL_ID
from longstep.tasks.fleet_gate import STATUS_CHANGE
from longstep.store import CheckpointStore

import itertools
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from longstep_kit.local.faults import Fault
from longstep_kit.local.iam import acting_as
from longstep_kit.local.report import build_report
from longstep_kit.local.runner import RunOptions, run_scenario, start_input
from longstep_kit.local.scenario import Scenario, load_scenario
from longstep_kit.local.stack import LocalStack
from longstep_kit.local.world import check_and_seed
from longstep_kit.testing.wait import wait_execution
from tests.local.conftest import delegate_context
from tests.conftest import campaign

SCENARIOS = Path(__file__).resolve().parents[2] / "events" / "scenarios"
FLEET = {
    "concurrency": {"key": "agent", "limit": 50},
    "rate_limits": {DEFAULT_MODEL_ID: {"requests_per_minute": 6000, "tokens_per_minute": 10_000_000, "tokens_per_call": 100}},
}
_names = itertools.count()


@pytest.fixture(scope="module")
def stack():
    # The project's agents and the delegate scenario's, and the fleet's states (a concurrency key
    # and a model rate limit, loose enough to bind nobody): every task state is reachable on it.
    with LocalStack(context=delegate_context(fleet=FLEET)) as local:
        yield local


def _condition() -> Scenario:
    """A condition that never holds: CheckCondition, WaitBackoff, then the timeout."""
    triage = load_scenario(SCENARIOS / "triage.json")
    wait = {"condition": "ticket_status", "args": {"ticket_id": "BUG-102", "status": "closed"}, "check_every_seconds": 60, "timeout_seconds": 600}
    return Scenario.model_validate(
        {
            "name": "condition",
            "input": {"goal": "Wait until BUG-102 is closed.", "agent": "triage", "max_turns": 4},
            "world": triage.world,
            "turns": {
                "0": {"text": "Waiting for the ticket to close.", "tool_calls": [{"name": "wait_for", "input": wait}]},
                "1": {"text": "Summary: BUG-102 did not close in time."},
            },
        }
    )


def _chunked() -> Scenario:
    """The two-day timer scenario handed over to a new execution every two turns."""
    timer = load_scenario(SCENARIOS / "wait_for_timer.json")
    return Scenario.model_validate({**timer.model_dump(), "input": {**timer.input.model_dump(), "turns_per_execution": 2}})


SCENARIO_FILES = {name: SCENARIOS / f"{name}.json" for name in ("triage", "wait_for_event", "delegate")}
BUILT = {"condition": _condition, "chunked": _chunked}

# Each task state of the definition: the scenario (and faults) that reaches it, and which of the
# run's invocations of its function to stop at (the first, or a later one: mid-run).
CASES: dict[str, tuple[str, list[Fault], int]] = {
    "Init": ("triage", [], 0),
    "ModelTurn": ("triage", [], 3),
    "CallTool": ("triage", [], 2),
    # The fourth call: turn 2's one file_ticket, run by CallOneTool (no Map).
    "CallOneTool": ("triage", [], 3),
    "RequestApproval": ("triage", [], 0),
    "Finish": ("triage", [], 0),
    "EscalateModelTurn": ("triage", [Fault("permanent", 2)], 0),
    "WaitForEvent": ("wait_for_event", [], 0),
    "CheckCondition": ("condition", [], 1),
    "ContinueAsNew": ("chunked", [], 0),
    "DelegateToSubagent": ("delegate", [], 1),  # the second of the turn: no sibling call is in flight
    # A child's model call fails for good and its escalation is aborted (--approve reject): the
    # child tells its parent (ChildFailed) before it fails. The stop is the child's.
    "ModelTurnTellParent": ("delegate", [Fault("permanent", 1)], 0),
    # Paused after turn 2 (longstep pause): the stop comes as its Pause task parks the run.
    "Pause": ("triage", [], 0),
    # The fleet's states (one FleetGate function): the run's first invocation of it is its
    # AcquireSlot (a task token: the stop comes while it files the run for a slot), the second
    # its first DrawRate (a plain task).
    "AcquireSlot": ("triage", [], 0),
    "DrawRate": ("triage", [], 1),
}
# Task states that invoke the same function as a state above, with the same kind of task (a plain
# Lambda task, or the waitForTaskToken integration inside the Map): the engine stops them the
# same way. Reaching them needs a tool without a probe crashing after its effect (EscalateCallTool)
# or a child's escalation left to time out or failing in a tool call (the other TellParent states).
SAME_FUNCTION_AS = {
    "EscalateCallTool": "EscalateModelTurn",
    "ReleaseSlot": "DrawRate",  # after Finish: the same plain FleetGate task
    "ModelTurnTellParentUnanswered": "ModelTurnTellParent",
    "CallToolTellParent": "ModelTurnTellParent",
    "CallToolTellParentUnanswered": "ModelTurnTellParent",
    "EscalateCallOneTool": "EscalateModelTurn",
    "CallOneToolTellParent": "ModelTurnTellParent",
    "CallOneToolTellParentUnanswered": "ModelTurnTellParent",
    # The escalations of the other steps (docs/failures.md): the same Escalate and ChildFailed functions.
    **{
        name: like
        for step in ("Init", "Finish", "ContinueAsNew", "RequestApproval", "WaitForEvent")
        for name, like in (
            (f"Escalate{step}", "EscalateModelTurn"),
            (f"{step}TellParent", "ModelTurnTellParent"),
            (f"{step}TellParentUnanswered", "ModelTurnTellParent"),
        )
    },
}


def _scenario(name: str) -> Scenario:
    return BUILT[name]() if name in BUILT else load_scenario(SCENARIO_FILES[name])


def _definition_states(stack) -> dict[str, dict[str, Any]]:
    definition = json.loads(stack.client("stepfunctions").describe_state_machine(stateMachineArn=stack.state_machine_arn)["definition"])
    states = dict(definition["States"])
    for state in definition["States"].values():
        if state["Type"] == "Map":
            states.update(state["ItemProcessor"]["States"])
    return states


def _function_of(states: dict[str, dict[str, Any]], name: str, agent: str = "triage") -> str:
    """The function name Task state ``name`` invokes (a plain Lambda ARN, the invoke integration's
    FunctionName, or the workflow variable the agent's BindAgent state assigns)."""
    state = states[name]
    arguments = state.get("Arguments") or state.get("Parameters") or {}
    arn = arguments.get("FunctionName") or arguments.get("FunctionName.$") or state["Resource"]
    if arn.startswith("$"):
        arn = states[f"BindAgent-{agent}"]["Assign"][arn[1:]]
    return arn.split(":function:", 1)[-1].split(":", 1)[0]


def _run_of(event: dict[str, Any]) -> str | None:
    for holder in (event, event.get("item") or {}, event.get("cursor") or {}):
        if holder.get("run_id"):
            return holder["run_id"]
    return None


_clean: dict[str, dict[str, Any]] = {}


def _clean_report(stack, scenario_name: str) -> dict[str, Any]:
    if scenario_name not in _clean:
        stack.reset_data()
        report = run_scenario(stack, _scenario(scenario_name), RunOptions(run_id="stopped", execution_name=f"clean-{next(_names)}"))
        assert report["status"] == "SUCCEEDED", report.get("cause")
        _clean[scenario_name] = report
    return _clean[scenario_name]


class StopAt:
    """A dispatcher hook: StopExecution on the execution of the run (``run_id`` or one of its
    child runs) whose ``n``-th invocation of ``function`` starts; then records every invocation
    of that run that starts."""

    def __init__(self, stack, function: str, run_id: str, n: int) -> None:
        self.stack, self.function, self.run_id, self.n = stack, function, run_id, n
        self.seen = 0
        self.stopped: str | None = None  # the ARN of the execution stopped
        self.stopped_run: str | None = None  # and its run's id
        self.after: list[str] = []  # functions of that run invoked after the stop
        self._lock = threading.Lock()

    def _running_execution(self, run_id: str) -> str:
        sfn = self.stack.client("stepfunctions")
        listed = sfn.list_executions(stateMachineArn=self.stack.state_machine_arn, statusFilter="RUNNING", maxResults=1000)["executions"]
        (arn,) = [
            e["executionArn"] for e in listed if json.loads(sfn.describe_execution(executionArn=e["executionArn"])["input"])["run_id"] == run_id
        ]
        return arn

    def __call__(self, invocation) -> None:
        run_id = _run_of(invocation.event) or ""
        if run_id != self.run_id and not run_id.startswith(f"{self.run_id}-"):
            return
        with self._lock:
            if self.stopped is not None:
                if run_id == self.stopped_run:
                    self.after.append(invocation.function)
                return
            if invocation.function != self.function:
                return
            self.seen += 1
            if self.seen <= self.n:
                return
            self.stopped, self.stopped_run = self._running_execution(run_id), run_id
        with acting_as(None):  # the operator's call, not the function's
            self.stack.client("stepfunctions").stop_execution(executionArn=self.stopped, error="Operator", cause="stopped mid-state")


def _resume_and_compare(stack, scenario: Scenario, clean: dict[str, Any]) -> None:
    """A new execution of the same run replays what was recorded: the clean transcript, no duplicate."""
    resumed = run_scenario(stack, scenario, RunOptions(run_id="stopped", execution_name=f"resumed-{next(_names)}"))
    assert resumed["status"] == "SUCCEEDED", resumed.get("cause")
    assert resumed["transcript_sha256"] == clean["transcript_sha256"]
    assert resumed["effects"]["duplicate_effects"] == 0


def test_every_task_state_of_the_definition_is_stopped_at(stack):
    tasks = {name for name, state in _definition_states(stack).items() if state["Type"] == "Task"}
    assert tasks == set(CASES) | set(SAME_FUNCTION_AS)
    states = _definition_states(stack)
    for state, like in SAME_FUNCTION_AS.items():
        assert _function_of(states, state) == _function_of(states, like)


def test_a_stop_right_after_start_aborts_before_the_first_state(stack):
    scenario = _scenario("triage")
    clean = _clean_report(stack, "triage")
    stack.reset_data()
    check_and_seed(stack, scenario, scenario.name)
    sfn = stack.client("stepfunctions")
    first = len(stack.dispatcher.invocations)
    arn = sfn.start_execution(
        stateMachineArn=stack.alias_arn, name=f"early-{next(_names)}", input=json.dumps(start_input(stack, scenario, "stopped"))
    )["executionArn"]
    sfn.stop_execution(executionArn=arn, error="Operator", cause="stopped at once")  # moto raised here: HTTP 500
    assert wait_execution(sfn, arn, 60)["status"] == "ABORTED"
    events = sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]
    assert [e["type"] for e in events] == ["ExecutionStarted", "ExecutionAborted"]
    # Nothing of the execution runs; the fleet's rule on the ABORTED event does (as in AWS): it
    # finds no slot held.
    late = [i for i in stack.dispatcher.invocations[first:] if i.event.get("detail-type") != STATUS_CHANGE]
    assert late == []
    _resume_and_compare(stack, scenario, clean)


# The suite stops one task of each kind (a plain Lambda task, a task inside the Map, a task-token
# wait, the Pause); `make campaign` stops at every task state.
REPRESENTATIVE_STATES = {"ModelTurn", "CallTool", "RequestApproval", "Pause"}


@pytest.mark.parametrize("state", campaign(sorted(CASES), REPRESENTATIVE_STATES.__contains__))
def test_a_stop_while_a_task_state_runs_aborts_and_the_run_resumes_cleanly(stack, state):
    scenario_name, faults, n = CASES[state]
    clean = _clean_report(stack, scenario_name)
    scenario = _scenario(scenario_name)
    stack.reset_data()
    hook = StopAt(stack, _function_of(_definition_states(stack), state), "stopped", n)
    stack.dispatcher.before_invoke.append(hook)
    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))

    def pause_after_turn_2(inv) -> None:
        if inv.task == "model_turn" and inv.error is None and inv.result.get("turn") == 2 and state == "Pause":
            steering.pause(store, "stopped")

    stack.dispatcher.after_invoke.append(pause_after_turn_2)
    # The child's escalation is aborted. A request or escalation made as the stop came is left
    # unanswered (its token is closed: an answer is refused with TaskTimedOut, as in AWS); the
    # resumed run makes it again and answers it.
    approve = {"ModelTurnTellParent": "reject", "RequestApproval": "external", "EscalateModelTurn": "external"}.get(state, "auto")
    try:
        report = run_scenario(stack, scenario, RunOptions(run_id="stopped", execution_name=f"stop-{next(_names)}", faults=faults, approve=approve))
    finally:
        stack.dispatcher.before_invoke.remove(hook)
        stack.dispatcher.after_invoke.remove(pause_after_turn_2)
    if state == "Pause":  # `longstep resume` of a stopped run clears its steering first
        steering.clear_stop(store, "stopped")
    assert hook.stopped is not None, f"{state} was not reached"
    sfn = stack.client("stepfunctions")
    stopped = sfn.describe_execution(executionArn=hook.stopped)
    assert stopped["status"] == "ABORTED", stopped
    events = sfn.get_execution_history(executionArn=hook.stopped, maxResults=1000)["events"]
    aborted = [i for i, e in enumerate(events) if e["type"] == "ExecutionAborted"]
    assert aborted, [e["type"] for e in events[-5:]]
    # moto's unwinding may log an iteration's end after it; no state is entered, nothing scheduled.
    late = [e["type"] for e in events[aborted[0] + 1 :] if "stateEnteredEventDetails" in e or e["type"].endswith("Scheduled")]
    assert late == []
    entered = [e["stateEnteredEventDetails"]["name"] for e in events if "stateEnteredEventDetails" in e]
    if state == "ContinueAsNew":
        # The running ContinueAsNew finished its step: the next execution took the run over
        # (AWS stops the execution, not the Lambda invocation that started another one).
        assert "HandedOver" not in entered
        listed = sfn.list_executions(stateMachineArn=stack.state_machine_arn, maxResults=1000)["executions"]
        handed = [e for e in listed if e["name"].startswith(f"{stopped['name']}--g")]
        assert handed, "the continuation was not started"
        arn = min(handed, key=lambda e: e["startDate"])["executionArn"]
        while True:  # follow the hand-overs to the run's end
            described = wait_execution(sfn, arn, 60)
            arn = json.loads(described.get("output") or "{}").get("continued_as") or ""
            if not arn:
                break
        assert described["status"] == "SUCCEEDED", described
        followed = build_report(stack, "stopped", [described["executionArn"]], 0, 0.0)
        assert followed["transcript_sha256"] == clean["transcript_sha256"]
        assert followed["effects"]["duplicate_effects"] == 0
        return
    assert hook.after == [], f"invoked after the stop: {hook.after}"
    if hook.stopped_run != "stopped":
        # A child was stopped: its parent's call ends at its subagent timeout, the parent goes on.
        assert report["status"] == "SUCCEEDED", report.get("cause")
        assert report["effects"]["duplicate_effects"] == 0
        return
    assert report["status"] == "ABORTED"
    assert hook.after == [], f"invoked after the stop: {hook.after}"
    assert state in entered
    _resume_and_compare(stack, scenario, clean)
