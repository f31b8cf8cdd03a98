"""Run a workflow scenario on the local stack: start the workflow's state machine, answer its
approvals and signals from the scenario, inject faults at its steps, and report.

A workflow scenario is a JSON file with a ``workflow`` key (agent scenarios have none): the
workflow's name, its start input, the approvers' decisions by approval name, the signals to
send. ``reference`` registers the workflow for the local run when the project's cdk.json does
not (the kit's own sample keeps its default stack agent-only).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from longstep import executions, faults
from longstep.artifacts import ARTIFACT_PREFIX, ArtifactStore
from longstep.humans.decisions import Decision, decide
from longstep.humans.escalations import Resolution, resolve
from longstep.errors import ApprovalAlreadyDecidedError, ApprovalExpiredError, BadRequestError
from longstep.json_input import parse_json
from longstep.pinning import alias_arn
from longstep_kit.config import workflow_output_name
from longstep.references import REFERENCE
from longstep.steps import RecordLease
from longstep.workflows.escalations import escalation_key
from longstep_kit.local.faults import FaultInjector
from longstep_kit.local.run_options import LocalRunError, RunOptions
from longstep_kit.local.scenario import Expectation, ScenarioDecision, ScenarioSignal, ScenarioSubagent, load_model_file
from longstep_kit.local.session import LocalSession
from longstep_kit.local.stack import LocalStack
from longstep_kit.local.workflow_report import build_workflow_report
from longstep_kit.ops.views.history import execution_history

HANDLER = "longstep_functions.workflow.lambda_handler"


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
        data = parse_json(Path(path).read_text(), str(path))
    except (OSError, BadRequestError, UnicodeDecodeError):
        return False  # the agent scenario loader reports the problem
    return isinstance(data, dict) and "workflow" in data


def load_workflow_scenario(path: str | Path) -> WorkflowScenario:
    """Read and validate a workflow scenario.

    Raises:
        ScenarioError: unreadable, not JSON, or a field is invalid (named by its path).
    """
    return load_model_file(path, WorkflowScenario)


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
    arn = stack.outputs.get(workflow_output_name(workflow))
    if arn is None:
        raise LocalRunError(f"workflow: the stack serves no workflow {workflow!r} (register it in cdk.json longstep.workflows)")
    return arn


@dataclass
class _Session(LocalSession):
    """One local workflow run in progress: what its driver (``_wait_for_end``) and its dispatcher
    hook (``on_invoke``) share, beyond any local run's (``LocalSession``)."""

    scenario: WorkflowScenario
    invocations: list[tuple[float, Any]] = field(default_factory=list)
    start: dict[str, Any] = field(default_factory=dict)
    first_name: str = ""

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
                self.send_signals("waiting", directive["event"])
        self.wake.set()

    def _decide(self, approval_id: str, name: str) -> None:
        if self.options.approve == "external":
            return
        if self.options.approve == "reject":
            decision = Decision(decision="reject", reason="rejected by --approve reject", approver="local-cli")
        else:
            scripted = self.scenario.approvals.get(name)
            if scripted is not None and scripted.decision == "timeout":
                return  # nobody answers: the task token times out
            body = scripted.model_dump(exclude_none=True) if scripted else {"decision": "approve"}
            decision = Decision(**body, approver="local-scenario" if scripted else "local-auto")
        try:
            decide(self.approvals, self.stack.client("stepfunctions"), approval_id, decision)
        except (ApprovalAlreadyDecidedError, ApprovalExpiredError) as exc:  # it timed out, or was answered elsewhere
            # Raised here, in the dispatcher's hook, it failed the Approval state (a lost
            # SendTaskSuccess response, whose retry heard TaskTimedOut, did that).
            self.emit(f"  approval {name}: not decided: {exc}")
            return
        self.emit(f"  approval {name}: {decision.decision}")

    def _resolve(self, parked: dict[str, Any]) -> None:
        """Answer an escalated step: the scenario's answer for it, else retry once, then abort."""
        if self.options.approve == "external":
            return
        store = self.store
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


def run_workflow_scenario(stack: LocalStack, scenario: WorkflowScenario, options: RunOptions | None = None) -> dict[str, Any]:
    """Run the workflow scenario to its end on ``stack`` and return the report.

    ``options.faults`` crash invocations at ``POINT@N`` (N: a step's position, or a child agent
    run's turn); ``options.restart_at`` stops the run's execution when the step at position N
    (or a child's tool call in turn N) starts, and starts a new execution of the run.
    """
    options = options or RunOptions()
    stack.clock.rewind()  # every run starts at the stack's first instant (unless another is in flight)
    run_id = options.run_id or scenario.run_id or scenario.name
    # On the alias, as a deployed workflow's runs start: the run keeps that version's code.
    arn = alias_arn(state_machine_arn(stack, scenario.workflow))
    session = _Session(stack, scenario, run_id, options)
    injector = FaultInjector(
        plan=list(options.faults),
        lock=RecordLease,
        restart_at=options.restart_at,
        on_restart=lambda _run: session.stop_for_restart(),
        restart_point=faults.BEFORE_TOOL,
        dispatcher=stack.dispatcher,
        lambda_client=lambda: stack.client("lambda"),
    )
    sfn = stack.client("stepfunctions")
    stack.dispatcher.after_invoke.append(session.on_invoke)
    injector.install()
    started, virtual_start = time.perf_counter(), stack.clock.time()
    try:
        session.start = {"run_id": run_id, "workflow": scenario.workflow, "input": scenario.input}
        if scenario.passes_per_execution:
            session.start["passes_per_execution"] = scenario.passes_per_execution
        script = scenario.script()
        if script is not None:  # the child agent runs play the scenario's scripts
            artifacts = ArtifactStore(stack.outputs["ArtifactBucketName"], stack.client("s3"))
            ref = artifacts.put(json.dumps(script).encode())
            session.start["model"] = {"provider": "scripted", "script_uri": f"s3://{artifacts.bucket}/{ARTIFACT_PREFIX}{ref['sha256']}"}
        session.first_name = options.execution_name or run_id
        with stack.clock.held():  # signals due at the start go out before time can move
            session.executions.append(
                sfn.start_execution(stateMachineArn=arn, name=session.first_name, input=json.dumps(session.start))["executionArn"]
            )
            session.send_signals("start")
        described = _wait_for_end(session, sfn, arn, options.timeout_seconds)
    finally:
        injector.uninstall()
        stack.dispatcher.after_invoke.remove(session.on_invoke)
    events = [event for execution in session.executions for event in execution_history(sfn, execution)]
    report = build_workflow_report(stack, scenario.name, scenario.workflow, run_id, described, events, session.invocations)
    report.update(
        executions=len(session.executions),
        restarts=session.restarts,
        # The state machine version each execution ran on (pinning: started on the alias ``live``).
        versions=[sfn.describe_execution(executionArn=arn).get("stateMachineVersionArn") for arn in session.executions],
        wall_seconds=round(time.perf_counter() - started, 3),
        virtual_seconds=stack.clock.time() - virtual_start,
        faults_injected=injector.injected,
        faults_unfired=injector.unfired(),
        faults_offered=sorted(injector.seen),
        effects_executed=injector.reached[faults.AFTER_EFFECT],
    )
    return report


def _wait_for_end(session: _Session, sfn: Any, arn: str, timeout_seconds: float) -> dict[str, Any]:
    """Follow the run's executions (continue-as-new hands it on; a restart starts the next) to the
    end; how the last one ended."""
    deadline = time.monotonic() + timeout_seconds
    session.stack.execution_ends.append(session.on_execution_end)
    try:
        return _follow(session, sfn, arn, deadline, timeout_seconds)
    finally:
        session.stack.execution_ends.remove(session.on_execution_end)


def _follow(session: _Session, sfn: Any, arn: str, deadline: float, timeout_seconds: float) -> dict[str, Any]:
    """The driver's passes: a status look when an execution has ended (or a second has passed)."""
    last_look: float | None = None  # None: look now (a new execution to follow)
    while True:
        execution = session.executions[-1]
        if last_look is None or session.time_to_look(last_look):
            last_look = time.monotonic()
            described = sfn.describe_execution(executionArn=execution)
            handed_to = json.loads(described.get("output") or "{}") if described["status"] == "SUCCEEDED" else {}
            if isinstance(handed_to, dict) and handed_to.get("continued_as"):
                session.executions.append(handed_to["continued_as"])
                session.emit(f"  -- continued as a new execution (generation {handed_to.get('generation')})")
                last_look = None
                continue
            if described["status"] == "ABORTED" and session.restarts_pending:
                session.restarts_pending -= 1
                # The run's next generation, as a resume names it: the log carries the run on.
                generation = len(session.executions)
                name = executions.generation_name(executions.first_name(session.first_name), generation)
                started = sfn.start_execution(stateMachineArn=arn, name=name, input=json.dumps({**session.start, "generation": generation}))
                session.executions.append(started["executionArn"])
                session.stack.clock.release()
                last_look = None
                continue
            if described["status"] != "RUNNING":
                return described
        if time.monotonic() > deadline:
            sfn.stop_execution(executionArn=execution, error="LocalTimeout", cause="local run exceeded its time limit")
            raise LocalRunError(f"workflow run {session.run_id} still RUNNING after {timeout_seconds} s")
        session.wake.wait(0.05)
        session.wake.clear()


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
