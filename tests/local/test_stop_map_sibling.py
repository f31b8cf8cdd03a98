"""A stop while a Map of tool calls runs: no sibling CallTool invocation starts after it.

Turn 1 of triage.json reads two documents, two iterations of the ToolCalls Map side by side. The
second iteration is held inside its CallTool Task state, past the state's check that the program
runs and before its Lambda call (moto runs that call on a thread of its own); the first
iteration's invocation stops the execution, then lets the second go. moto's engine invoked the
second CallTool after the stop (AWS starts no task after StopExecution:
https://docs.aws.amazon.com/step-functions/latest/apireference/API_StopExecution.html). Now the
execution ends ABORTED with only the first call invoked, and a new execution of the run finishes
it with no duplicate effect.
"""

from __future__ import annotations

import json
import threading

from longstep_kit.local.iam import acting_as
from longstep_kit.local.runner import RunOptions, run_scenario

RUN = "sibling"


def _call_of(payload) -> tuple[int, int] | None:
    """(turn, call) of a CallTool payload of the run, else None."""
    if isinstance(payload, (bytes, str)):  # moto hands the task its Payload as JSON bytes
        payload = json.loads(payload)
    if not isinstance(payload, dict) or payload.get("run_id") != RUN or "call" not in payload or "tool" not in payload:
        return None
    return int(payload["turn"]), int(payload["call"])


class Interleaving:
    """Holds turn 1's second call before its Lambda call; the first call's invocation stops the
    execution once the second is held, then releases it; records every invocation after the stop."""

    def __init__(self, stack) -> None:
        self.stack = stack
        self.held, self.release = threading.Event(), threading.Event()
        self.stopped: str | None = None
        self.after: list[tuple[str, object]] = []

    def before_lambda_call(self, payload) -> None:  # on the second iteration's task thread
        if _call_of(payload) == (1, 1) and not self.held.is_set():
            self.held.set()
            assert self.release.wait(10), "the first call never stopped the execution"

    def on_invoke(self, invocation) -> None:  # the dispatcher's before_invoke hook
        event = invocation.event if isinstance(invocation.event, dict) else {}
        if self.stopped is not None:
            if RUN in json.dumps(event):
                self.after.append((invocation.task, _call_of(event)))
            return
        if invocation.task != "call_tool" or _call_of(event) != (1, 0):
            return
        try:
            assert self.held.wait(10), "the second call never reached its Lambda call"
            sfn = self.stack.client("stepfunctions")
            listed = sfn.list_executions(stateMachineArn=self.stack.state_machine_arn, statusFilter="RUNNING")["executions"]
            (arn,) = [e["executionArn"] for e in listed if e["name"] == "sibling-stopped"]
            with acting_as(None):  # the operator's call, not the function's
                sfn.stop_execution(executionArn=arn, error="Operator", cause="stopped while the Map runs")
            self.stopped = arn
        finally:
            self.release.set()


def test_no_sibling_call_tool_is_invoked_after_a_stop(stack, triage, monkeypatch):
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_lambda import StateTaskServiceLambda

    stack.reset_data()
    plan = Interleaving(stack)
    original = StateTaskServiceLambda._eval_service_task

    def held(task, env, resource_runtime_part, normalised_parameters, state_credentials):
        plan.before_lambda_call(normalised_parameters.get("Payload"))
        return original(task, env, resource_runtime_part, normalised_parameters, state_credentials)

    monkeypatch.setattr(StateTaskServiceLambda, "_eval_service_task", held)
    stack.dispatcher.before_invoke.append(plan.on_invoke)
    try:
        report = run_scenario(stack, triage, RunOptions(run_id=RUN, execution_name="sibling-stopped", timeout_seconds=60))
    finally:
        stack.dispatcher.before_invoke.remove(plan.on_invoke)
        monkeypatch.undo()
    assert plan.stopped is not None and plan.held.is_set()
    assert report["status"] == "ABORTED", report.get("cause")
    assert plan.after == [], f"invoked after the stop: {plan.after}"
    sfn = stack.client("stepfunctions")
    events = sfn.get_execution_history(executionArn=plan.stopped, maxResults=1000)["events"]
    aborted = min(i for i, e in enumerate(events) if e["type"] == "ExecutionAborted")
    assert not [e["type"] for e in events[aborted + 1 :] if "stateEnteredEventDetails" in e or e["type"].endswith("Scheduled")]

    resumed = run_scenario(stack, triage, RunOptions(run_id=RUN, execution_name="sibling-resumed", timeout_seconds=120))
    assert resumed["status"] == "SUCCEEDED", resumed.get("cause")
    assert resumed["effects"]["duplicate_effects"] == 0
