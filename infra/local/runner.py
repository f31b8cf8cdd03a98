"""Run an agent scenario on the local stack: seed the world, start the execution, drive it to its
end (answering the humans' part: ``local/answers.py``; injecting faults and restarts), and report.

``RunOptions``, ``LocalRunError`` (``local/run_options.py``) and ``choose_decision``
(``local/answers.py``) are importable from here too: tests, benches and docs use this module."""

from __future__ import annotations

import json
import time
from typing import Any

from longstep import faults
from longstep.artifacts import ARTIFACT_PREFIX, ArtifactStore
from longstep.errors import lock_wait_error_names, retryable_error_names
from longstep.inputs import StartInput, parse_model
from longstep.steps import RecordLease
from longstep_kit.local.answers import AgentSession, answer_humans, choose_decision
from longstep_kit.local.faults import FaultInjector
from longstep_kit.local.progress import printer
from longstep_kit.local.report import build_report
from longstep_kit.local.run_options import ApproveMode, LocalRunError, RunOptions
from longstep_kit.local.scenario import Scenario
from longstep_kit.local.stack import LocalStack
from longstep_kit.local.world import check_and_seed
from longstep_kit.ops import runs as client

__all__ = ["AgentSession", "ApproveMode", "LocalRunError", "RunOptions", "attempts_by_category", "choose_decision", "run_scenario", "start_input"]


def start_input(stack: LocalStack, scenario: Scenario, run_id: str) -> dict[str, Any]:
    """Upload the scenario's script and build a validated start input."""
    artifacts = ArtifactStore(stack.outputs["ArtifactBucketName"], stack.client("s3"))
    ref = artifacts.put(json.dumps(scenario.script()).encode())
    raw = {
        "run_id": run_id,
        "goal": scenario.input.goal,
        "agent": scenario.input.agent,
        "model": {"provider": "scripted", "script_uri": f"s3://{artifacts.bucket}/{ARTIFACT_PREFIX}{ref['sha256']}"},
    }
    if scenario.input.max_turns:
        raw["max_turns"] = scenario.input.max_turns
    if scenario.input.turns_per_execution:
        raw["turns_per_execution"] = scenario.input.turns_per_execution
    parse_model(StartInput, raw, "start input")
    return raw


def run_scenario(stack: LocalStack, scenario: Scenario, options: RunOptions | None = None) -> dict[str, Any]:
    """Run ``scenario`` to the end on ``stack`` and return the report."""
    options = options or RunOptions()
    stack.clock.rewind()  # every run starts at the stack's first instant (unless another is in flight)
    # A deterministic default: the same scenario gives the same ids, so transcripts compare.
    run_id = options.run_id or scenario.input.run_id or scenario.name
    session = AgentSession(stack, scenario, run_id, options, execution_name=options.execution_name or run_id)
    check_and_seed(stack, scenario, scenario.name)
    first_invocation = len(stack.dispatcher.invocations)
    _check_isolated_faults(stack, options)
    injector = FaultInjector(
        plan=list(options.faults),
        lock=RecordLease,
        restart_at=options.restart_at,
        on_restart=lambda _run: session.stop_for_restart(),
        throttle_rate=options.throttle,
        seed=options.seed,
        dispatcher=stack.dispatcher,
        lambda_client=lambda: stack.client("lambda"),
    )
    hook = printer(session.emit) if options.emit else None
    if hook:
        stack.dispatcher.after_invoke.append(hook)
    stack.dispatcher.after_invoke.append(session.on_invoke)
    injector.install()
    started = time.perf_counter()
    virtual_start = stack.clock.time()
    try:
        payload = start_input(stack, scenario, run_id)
        sfn = stack.client("stepfunctions")
        session.hold()  # the signals due at the start go out before time can move
        # On the alias, as a deployed stack's runs start: the run keeps that version's code.
        first = sfn.start_execution(stateMachineArn=stack.alias_arn, name=session.execution_name, input=json.dumps(payload))
        session.executions.append(first["executionArn"])
        session.send_signals("start")
        session.release_holds()
        _drive(session)
    finally:
        session.release_holds()
        session.release_paused_holds()  # a run that ended while paused (stopped) holds time no more
        injector.uninstall()
        stack.dispatcher.after_invoke.remove(session.on_invoke)
        if hook:
            stack.dispatcher.after_invoke.remove(hook)
    report = build_report(stack, run_id, session.executions, first_invocation, time.perf_counter() - started)
    report["faults_injected"] = injector.injected
    report["faults_unfired"] = injector.unfired()
    # What really ran, crashed invocations included (the report's counts come from finished ones).
    report["model_calls"]["executed"] = injector.reached[faults.AFTER_MODEL]
    report["tool_calls"]["executed"] = injector.reached[faults.AFTER_EFFECT]
    report["executions"] = len(session.executions)
    report["restarts"] = session.restarts
    report["virtual_seconds"] = stack.clock.time() - virtual_start
    report["attempts"] = attempts_by_category(stack.dispatcher.invocations[first_invocation:], report)
    return report


def _check_isolated_faults(stack: LocalStack, options: RunOptions) -> None:
    """Refuse faults a worker process would not feel (they are raised in this one): with the
    Lambdas in workers (``local/worker_pool.py``) only ``kill.TASK@N`` reaches them."""
    from longstep_kit.local import fault_kinds

    if stack.dispatcher.isolation is None:
        return
    others = [f for f in options.faults if fault_kinds.kind_of(f.point) != fault_kinds.KILL]
    if others or options.restart_at is not None or options.throttle:
        what = f"fault {others[0].point}@{others[0].turn}" if others else "restart_at" if options.restart_at is not None else "throttle"
        raise LocalRunError(f"{what}: the Lambdas run in worker processes, which only kill.TASK@N faults reach")


TRANSIENT_ERRORS = frozenset(retryable_error_names()) | frozenset(lock_wait_error_names())


def attempts_by_category(invocations: list[Any], report: dict[str, Any]) -> dict[str, int]:
    """Failed attempts by failure class: what was retried, escalated, corrected or re-verified."""
    counts = {"transient": 0, "permanent": 0, "model": 0, "semantic": 0}
    for inv in invocations:
        if inv.error is not None and inv.task in ("model_turn", "call_tool"):
            counts["transient" if inv.error["errorType"] in TRANSIENT_ERRORS else "permanent"] += 1
    counts["model"] = report["corrections"]["model"]
    counts["semantic"] = report["corrections"]["semantic"]
    return counts


def _drive(session: AgentSession) -> None:
    """Answer approvals and escalations until the run's last execution ends; resume after restarts."""
    sfn = session.stack.client("stepfunctions")
    deadline = time.monotonic() + session.options.timeout_seconds
    session.stack.execution_ends.append(session.on_execution_end)
    try:
        _follow(session, sfn, deadline)
    finally:
        session.stack.execution_ends.remove(session.on_execution_end)


def _follow(session: AgentSession, sfn: Any, deadline: float) -> None:
    """The driver's passes: one after each invocation (the hook wakes it), a status look only
    when an execution has ended (or a second has passed)."""
    last_look: float | None = None  # None: look now (a new execution to follow)
    while True:
        if last_look is None or session.time_to_look(last_look):
            last_look = time.monotonic()
            described = sfn.describe_execution(executionArn=session.executions[-1])
            status = described["status"]
            if status != "RUNNING":
                if status == "ABORTED" and session.restarts_pending:
                    session.restarts_pending -= 1
                    session.executions.append(client.resume(sfn, session.stack.state_machine_arn, session.execution_name))
                    session.stack.clock.release()
                    last_look = None
                    continue
                handed_to = json.loads(described.get("output") or "{}").get("continued_as") if status == "SUCCEEDED" else None
                if handed_to:  # continue-as-new: the run goes on in the next execution
                    session.emit(f"  -- continued as a new execution (generation {handed_to.rsplit('--g', 1)[-1]})")
                    session.executions.append(handed_to)
                    last_look = None
                    continue
                return
        taken = session.holds  # the work behind these holds is done by the end of this pass
        if session.humans_needed:
            session.humans_needed = False
            if session.options.approve != "external":
                answer_humans(session, sfn)
        while session.waiting_events:
            session.send_signals("waiting", session.waiting_events.pop(0))
        session.release_holds(taken)
        if time.monotonic() > deadline:
            sfn.stop_execution(executionArn=session.executions[-1], error="LocalTimeout", cause="local run exceeded its time limit")
            raise LocalRunError(f"run {session.run_id} still RUNNING after {session.options.timeout_seconds} s")
        session.wake.wait(0.05)
        session.wake.clear()
