"""Run a workflow scenario on the local stack: start the workflow's state machine, answer its
approvals and signals from the scenario, inject faults at its steps, and report.

A workflow scenario is a JSON file with a ``workflow`` key (agent scenarios have none): the
workflow's name, its start input, the approvers' decisions by approval name, the signals to
send. ``reference`` registers the workflow for the local run when the project's cdk.json does
not (the kit's own sample keeps its default stack agent-only).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from longstep import faults
from longstep.artifacts import ARTIFACT_PREFIX, ArtifactStore
from longstep.humans import signals
from longstep.humans.decisions import Decision, decide
from longstep.humans.escalations import Resolution, resolve
from longstep.humans.table import ApprovalTable
from longstep.inputs import describe_validation_error
from longstep.references import REFERENCE
from longstep.steps import PowertoolsStepLock
from longstep.store import CheckpointStore, step_record
from longstep.workflows import log
from longstep.workflows.escalations import escalation_key
from longstep_kit.local.faults import FaultInjector
from longstep_kit.local.runner import LocalRunError, RunOptions
from longstep_kit.local.scenario import Expectation, ScenarioDecision, ScenarioError, ScenarioSignal, ScenarioSubagent
from longstep_kit.local.stack import LocalStack

HANDLER = "longstep.handlers.workflow.lambda_handler"
# Recorded values that differ from run to run by design; the log's hash leaves them out.
_UNSTABLE = (log.NOW, log.RANDOM, log.UUID, log.SLEEP, log.TIMER)


class WorkflowScenario(BaseModel):
    """A local run of a workflow, fully described."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    description: str = ""
    workflow: str = Field(min_length=1)
    reference: str | None = Field(default=None, pattern=REFERENCE.pattern)
    run_id: str | None = None
    input: dict[str, Any] = Field(default_factory=dict)
    passes_per_execution: int | None = Field(default=None, ge=1, description="hand the run to a new execution this often")
    approvals: dict[str, ScenarioDecision] = Field(default_factory=dict)
    escalations: dict[str, Resolution] = Field(default_factory=dict, description="a human's answer by step name")
    signals: list[ScenarioSignal] = Field(default_factory=list)
    subagents: dict[Annotated[str, Field(pattern=r"^s[1-9][0-9]*$")], ScenarioSubagent] = Field(
        default_factory=dict, description="scripts of the child agent runs of ctx.agent calls, by the call's position (s<seq>)"
    )
    expect: Expectation = Field(default_factory=Expectation)

    def script(self) -> dict[str, Any] | None:
        """The model script the run's agent steps play (None: the scenario calls no agent)."""
        if not self.subagents:
            return None
        return {"turns": {}, "children": {key: child.script() for key, child in sorted(self.subagents.items())}}


def is_workflow_scenario(path: str | Path) -> bool:
    """Whether the file is a workflow scenario (a JSON object with ``workflow``)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return False  # the agent scenario loader reports the problem
    return isinstance(data, dict) and "workflow" in data


def load_workflow_scenario(path: str | Path) -> WorkflowScenario:
    """Read and validate a workflow scenario.

    Raises:
        ScenarioError: unreadable, not JSON, or a field is invalid (named by its path).
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such scenario file") from None
    except json.JSONDecodeError as exc:
        raise ScenarioError(f"{path}: not valid JSON: {exc}") from None
    try:
        return WorkflowScenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(f"{path}: {describe_validation_error(exc)}") from None


def stack_context(scenario: WorkflowScenario, project: Path | None = None) -> dict[str, Any] | None:
    """The CDK context overrides that register the scenario's workflow (None: cdk.json does)."""
    from longstep_kit.project import cdk_context, find_project

    configured = cdk_context(find_project(project)).get("longstep", {}).get("workflows", {})
    if scenario.workflow in configured or scenario.reference is None:
        return None
    return {"longstep": {"workflows": {**configured, scenario.workflow: scenario.reference}}}


def state_machine_arn(stack: LocalStack, workflow: str) -> str:
    """The workflow's state machine on the stack.

    Raises:
        LocalRunError: the stack serves no such workflow.
    """
    suffix = "".join(part[:1].upper() + part[1:] for part in re.split(r"[^A-Za-z0-9]+", workflow) if part)
    arn = stack.outputs.get(f"WorkflowStateMachineArn{suffix}")
    if arn is None:
        raise LocalRunError(f"workflow: the stack serves no workflow {workflow!r} (register it in cdk.json longstep.workflows)")
    return arn


@dataclass
class _Session:
    stack: LocalStack
    scenario: WorkflowScenario
    run_id: str
    options: RunOptions
    invocations: list[tuple[float, Any]] = field(default_factory=list)
    wake: threading.Event = field(default_factory=threading.Event)

    def on_invoke(self, inv: Any) -> None:
        if (
            inv.handler != HANDLER
            or not isinstance(inv.event, dict)
            or inv.event.get("run_id", (inv.event.get("state") or {}).get("run_id")) != self.run_id
        ):
            return
        self.invocations.append((self.stack.clock.time(), inv))
        if inv.event.get("action") == "escalate" and inv.error is None and inv.result.get("status") == "pending":
            self._resolve(inv.result)
        elif inv.event.get("action") == "park" and inv.error is None:
            directive = inv.event["state"]["directive"]
            status = (inv.result or {}).get("status")
            # Answered here, while the handler's invocation still holds the clock: the wait's
            # timeout cannot fire before an answer that is already given.
            if status == "pending":
                self._decide(inv.result["approval_id"], directive["name"])
            elif status == "waiting":
                self._signal("waiting", directive["event"])
        self.wake.set()

    def _decide(self, approval_id: str, name: str) -> None:
        if self.options.approve == "external":
            return
        table = ApprovalTable(self.stack.outputs["ApprovalsTableName"], self.stack.client("dynamodb"))
        if self.options.approve == "reject":
            decision = Decision(decision="reject", reason="rejected by --approve reject", approver="local-cli")
        else:
            scripted = self.scenario.approvals.get(name)
            if scripted is not None and scripted.decision == "timeout":
                return  # nobody answers: the task token times out
            body = scripted.model_dump(exclude_none=True) if scripted else {"decision": "approve"}
            decision = Decision(**body, approver="local-scenario" if scripted else "local-auto")
        decide(table, self.stack.client("stepfunctions"), approval_id, decision)
        self.emit(f"  approval {name}: {decision.decision}")

    def _resolve(self, parked: dict[str, Any]) -> None:
        """Answer an escalated step: the scenario's answer for it, else retry once, then abort."""
        if self.options.approve == "external":
            return
        store = CheckpointStore(self.stack.outputs["CheckpointTableName"], self.stack.client("dynamodb"))
        scripted = self.scenario.escalations.get(parked.get("step") or "")
        branch = parked.get("branch")
        record = store.get(self.run_id, escalation_key(parked["seq"], branch)) or {}
        if self.options.approve == "auto" and scripted is not None:
            resolution = scripted.model_copy(update={"resolver": "local-scenario"})
        elif self.options.approve == "auto" and int(record.get("times", 1)) == 1:
            resolution = Resolution(action="retry", resolver="local-auto")
        else:
            resolution = Resolution(action="abort", resolver="local-auto")
        resolve(store, self.stack.client("stepfunctions"), self.run_id, parked["seq"], 0 if branch is None else branch, resolution)
        self.emit(f"  escalation at position {parked['seq']} ({parked.get('step') or 'workflow'}): {parked['error']} -> {resolution.action}")

    def _signal(self, at: str, event: str | None = None) -> None:
        store = CheckpointStore(self.stack.outputs["CheckpointTableName"], self.stack.client("dynamodb"))
        for signal in self.scenario.signals:
            if signal.at == at and (event is None or signal.event == event):
                outcome = signals.deliver(store, self.stack.client("stepfunctions"), self.run_id, signal.event, signal.payload)
                self.emit(f"  signal {signal.event}: {outcome}")

    def emit(self, line: str) -> None:
        if self.options.emit:
            self.options.emit(line)


def run_workflow_scenario(stack: LocalStack, scenario: WorkflowScenario, options: RunOptions | None = None) -> dict[str, Any]:
    """Run the workflow scenario to its end on ``stack`` and return the report."""
    options = options or RunOptions()
    run_id = options.run_id or scenario.run_id or scenario.name
    arn = state_machine_arn(stack, scenario.workflow)
    session = _Session(stack, scenario, run_id, options)
    injector = FaultInjector(
        plan=list(options.faults),
        lock=lambda: PowertoolsStepLock(stack.outputs["IdempotencyTableName"], stack.client("dynamodb")),
    )
    sfn = stack.client("stepfunctions")
    stack.dispatcher.after_invoke.append(session.on_invoke)
    injector.install()
    started, virtual_start = time.perf_counter(), stack.clock.time()
    try:
        start = {"run_id": run_id, "workflow": scenario.workflow, "input": scenario.input}
        if scenario.passes_per_execution:
            start["passes_per_execution"] = scenario.passes_per_execution
        script = scenario.script()
        if script is not None:  # the child agent runs play the scenario's scripts
            artifacts = ArtifactStore(stack.outputs["ArtifactBucketName"], stack.client("s3"))
            ref = artifacts.put(json.dumps(script).encode())
            start["model"] = {"provider": "scripted", "script_uri": f"s3://{artifacts.bucket}/{ARTIFACT_PREFIX}{ref['sha256']}"}
        with stack.clock.held():  # signals due at the start go out before time can move
            execution = sfn.start_execution(stateMachineArn=arn, name=options.execution_name or run_id, input=json.dumps(start))["executionArn"]
            session._signal("start")
        executions, described = _wait_for_end(session, sfn, execution, options.timeout_seconds)
    finally:
        injector.uninstall()
        stack.dispatcher.after_invoke.remove(session.on_invoke)
    history = [event for arn in executions for event in _history(sfn, arn)]
    report = _report(stack, session, described, history)
    report.update(
        executions=len(executions),
        wall_seconds=round(time.perf_counter() - started, 3),
        virtual_seconds=stack.clock.time() - virtual_start,
        faults_injected=injector.injected,
        effects_executed=injector.reached[faults.AFTER_EFFECT],
    )
    return report


def _wait_for_end(session: _Session, sfn: Any, execution: str, timeout_seconds: float) -> tuple[list[str], dict[str, Any]]:
    """Every execution of the run (continue-as-new hands it on) and how the last one ended."""
    deadline = time.monotonic() + timeout_seconds
    executions = [execution]
    while True:
        described = sfn.describe_execution(executionArn=execution)
        handed_to = json.loads(described.get("output") or "{}") if described["status"] == "SUCCEEDED" else {}
        if isinstance(handed_to, dict) and handed_to.get("continued_as"):
            execution = handed_to["continued_as"]
            executions.append(execution)
            session.emit(f"  -- continued as a new execution (generation {handed_to.get('generation')})")
            continue
        if described["status"] != "RUNNING":
            return executions, described
        if time.monotonic() > deadline:
            sfn.stop_execution(executionArn=execution, error="LocalTimeout", cause="local run exceeded its time limit")
            raise LocalRunError(f"workflow run {session.run_id} still RUNNING after {timeout_seconds} s")
        session.wake.wait(0.05)
        session.wake.clear()


def _history(sfn: Any, arn: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"executionArn": arn, "maxResults": 1000}
    while True:
        page = sfn.get_execution_history(**kwargs)
        events.extend(page["events"])
        if not page.get("nextToken"):
            return events
        kwargs["nextToken"] = page["nextToken"]


def _report(stack: LocalStack, session: _Session, described: dict[str, Any], history: list[dict[str, Any]]) -> dict[str, Any]:
    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
    steps = [step_record(i) for i in store.query_prefix(session.run_id, log.STEP_PREFIX)]
    stable = [(s.sk, s.kind, s.name, None if s.kind in _UNSTABLE else s.result) for s in steps]
    output = json.loads(described["output"]) if described.get("output") else None
    advanced = [inv for _, inv in session.invocations if inv.event.get("action") != "park" and inv.error is None]
    return {
        "scenario": session.scenario.name,
        "run_id": session.run_id,
        "workflow": session.scenario.workflow,
        "status": described["status"],
        "output": output,
        "error": described.get("error"),
        "cause": described.get("cause"),
        "steps": [{"sk": s.sk, "kind": s.kind, "name": s.name} for s in steps],
        "steps_executed": sum(int((inv.result or {}).get("steps_executed", 0)) for inv in advanced),
        "lambda_invocations": len(session.invocations),
        "failed_invocations": sum(1 for _, inv in session.invocations if inv.error is not None),
        "state_transitions": sum(1 for e in history if e["type"].endswith("StateEntered")),
        "history_events": len(history),
        "waits": _waits(session, history),
        "log_sha256": hashlib.sha256(json.dumps(stable, sort_keys=True, default=str).encode()).hexdigest(),
    }


def _waits(session: _Session, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each sleep: how long, and what ran meanwhile (Lambda invocations, history events)."""
    out = []
    for at, inv in session.invocations:
        directive = inv.result if inv.error is None and isinstance(inv.result, dict) else {}
        if directive.get("next") != log.WAIT:
            continue
        until = at + directive["seconds"]
        during = sum(1 for t, _ in session.invocations if at < t < until)
        out.append({"seq": directive["seq"], "seconds": directive["seconds"], "lambda_invocations_during": during})
    # Between a Sleep's entry and its exit, the history holds nothing else.
    entered = [i for i, e in enumerate(history) if e["type"] == "WaitStateEntered"]
    for wait, index in zip(out, entered):
        exited = next((j for j in range(index + 1, len(history)) if history[j]["type"] == "WaitStateExited"), len(history))
        wait["history_events_during"] = exited - index - 1
    return out


def workflow_tables(stack: LocalStack, workflow: str) -> dict[str, str]:
    """The tables ``workflow`` declares on the local stack: declared name -> physical name (read
    from its function's environment, as its steps find them)."""
    from longstep.resources import TABLE_VARIABLE_PREFIX
    from longstep.workflows.definition import ENV_WORKFLOWS

    for page in stack.client("lambda").get_paginator("list_functions").paginate():
        for fn in page["Functions"]:
            variables = (fn.get("Environment") or {}).get("Variables") or {}
            if fn.get("Handler") == HANDLER and workflow in json.loads(variables.get(ENV_WORKFLOWS) or "{}"):
                return {k.removeprefix(TABLE_VARIABLE_PREFIX).lower(): v for k, v in variables.items() if k.startswith(TABLE_VARIABLE_PREFIX)}
    raise KeyError(f"workflow {workflow!r}: no workflow function on the local stack")
