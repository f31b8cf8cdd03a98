"""Run a scenario on the local stack: seed the world, start the execution, answer approvals."""

from __future__ import annotations

import json
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Literal

from infra.local.progress import printer
from infra.local.report import build_report
from infra.local.scenario import Scenario, ScenarioDecision
from infra.local.stack import LocalStack
from longstep.approvals import Decision, decide, pending_approvals
from longstep.artifacts import ArtifactStore
from longstep.inputs import StartInput, parse_model
from longstep.store import CheckpointStore

ApproveMode = Literal["auto", "reject", "interactive"]


class LocalRunError(RuntimeError):
    """A local run could not finish (for example it waited longer than its time limit)."""


@dataclass
class RunOptions:
    """How a local run behaves.

    Attributes:
        approve: ``auto`` applies the scenario's decisions and approves the rest; ``reject``
            rejects every request; ``interactive`` asks on the terminal.
        run_id: the run id (defaults to the scenario's, else a fresh one).
        emit: where progress lines go (None: silent).
        timeout_seconds: give up on the execution after this long.
    """

    approve: ApproveMode = "auto"
    run_id: str | None = None
    emit: Callable[[str], None] | None = None
    timeout_seconds: float = 300.0


def seed_world(stack: LocalStack, scenario: Scenario) -> None:
    """Put the scenario's documents and tickets into the world tables."""
    ddb = stack.client("dynamodb")
    for doc in scenario.world.documents:
        ddb.put_item(
            TableName=stack.outputs["DocumentsTable"],
            Item={
                "doc_id": {"S": doc.doc_id},
                "title": {"S": doc.title},
                "summary": {"S": doc.summary},
                "body": {"S": doc.full_body()},
            },
        )
    for ticket in scenario.world.tickets:
        ddb.put_item(
            TableName=stack.outputs["TicketsTable"],
            Item={
                "ticket_id": {"S": ticket.ticket_id},
                "title": {"S": ticket.title},
                "body": {"S": ticket.body},
                "priority": {"S": ticket.priority},
                "status": {"S": ticket.status},
            },
        )


def start_input(stack: LocalStack, scenario: Scenario, run_id: str) -> dict[str, Any]:
    """Upload the scenario's script and build a validated start input."""
    artifacts = ArtifactStore(stack.outputs["ArtifactBucketName"], stack.client("s3"))
    ref = artifacts.put(json.dumps(scenario.script()).encode())
    raw = {
        "run_id": run_id,
        "goal": scenario.input.goal,
        "agent": scenario.input.agent,
        "model": {"provider": "scripted", "script_uri": ref["uri"]},
    }
    if scenario.input.max_turns:
        raw["max_turns"] = scenario.input.max_turns
    parse_model(StartInput, raw, "start input")
    return raw


def run_scenario(stack: LocalStack, scenario: Scenario, options: RunOptions | None = None) -> dict[str, Any]:
    """Run ``scenario`` to the end on ``stack`` and return the report."""
    options = options or RunOptions()
    run_id = options.run_id or scenario.input.run_id or f"{scenario.name}-{uuid.uuid4().hex[:8]}"
    seed_world(stack, scenario)
    first_invocation = len(stack.dispatcher.invocations)
    hook = printer(options.emit) if options.emit else None
    if hook:
        stack.dispatcher.after_invoke.append(hook)
    started = time.perf_counter()
    try:
        execution_arn = start_and_wait(stack, scenario, run_id, start_input(stack, scenario, run_id), options)
    finally:
        if hook:
            stack.dispatcher.after_invoke.remove(hook)
    return build_report(stack, run_id, [execution_arn], first_invocation, time.perf_counter() - started)


def start_and_wait(
    stack: LocalStack,
    scenario: Scenario,
    run_id: str,
    payload: dict[str, Any],
    options: RunOptions,
    execution_name: str | None = None,
) -> str:
    """Start an execution (named ``run_id`` unless told otherwise) and answer its approvals until it ends."""
    sfn = stack.client("stepfunctions")
    name = execution_name or run_id
    arn = sfn.start_execution(stateMachineArn=stack.state_machine_arn, name=name, input=json.dumps(payload))["executionArn"]
    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
    deadline = time.monotonic() + options.timeout_seconds
    while True:
        status = sfn.describe_execution(executionArn=arn)["status"]
        if status != "RUNNING":
            return arn
        for request in pending_approvals(store, run_id):
            decision = choose_decision(scenario, request, options)
            decide(store, sfn, run_id, request["turn"], request["call"], decision)
            if options.emit:
                options.emit(f"  turn {request['turn']:<3} approval[{request['call']}]      {decision.decision} ({request['tool']})")
        if time.monotonic() > deadline:
            sfn.stop_execution(executionArn=arn, error="LocalTimeout", cause="local run exceeded its time limit")
            raise LocalRunError(f"run {run_id} still RUNNING after {options.timeout_seconds} s")
        time.sleep(0.02)


def choose_decision(scenario: Scenario, request: dict[str, Any], options: RunOptions) -> Decision:
    """The decision for one pending approval under the run's approve mode."""
    if options.approve == "reject":
        return Decision(decision="reject", reason="rejected by --approve reject", approver="local-cli")
    if options.approve == "interactive":
        return _ask(request)
    scripted: ScenarioDecision | None = scenario.approvals.get(f"{request['turn']}:{request['call']}")
    if scripted is None:
        return Decision(decision="approve", approver="local-auto")
    return Decision(**scripted.model_dump(exclude_none=True), approver="local-scenario")


def _ask(request: dict[str, Any]) -> Decision:
    print(f"\napproval needed: {request['tool']} {json.dumps(request['input'])}", file=sys.stderr)
    while True:
        answer = input("[a]pprove, [r]eject, [e]dit? ").strip().lower()
        if answer.startswith("a"):
            return Decision(decision="approve", approver="local-interactive")
        if answer.startswith("r"):
            return Decision(decision="reject", reason=input("reason: ") or "rejected", approver="local-interactive")
        if answer.startswith("e"):
            try:
                return Decision(decision="edit", input=json.loads(input("new arguments (JSON): ")), approver="local-interactive")
            except (json.JSONDecodeError, ValueError) as exc:
                print(f"not accepted: {exc}", file=sys.stderr)



