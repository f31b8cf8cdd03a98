"""Run a scenario on the local stack: seed the world, start the execution, answer the humans' part
(approvals, escalations), inject faults and restarts, and report."""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from longstep_kit.local.faults import Fault, FaultInjector
from longstep_kit.local.progress import printer
from longstep_kit.local.report import build_report
from longstep_kit.local.scenario import Scenario, ScenarioDecision
from longstep_kit.local.stack import LocalStack
from longstep_kit.local.world import check_and_seed
from longstep import faults, keys
from longstep_kit.ops import runs as client
from longstep.errors import ApprovalAlreadyDecidedError, ApprovalExpiredError
from longstep.humans import signals
from longstep.humans.decisions import Decision, decide
from longstep.humans.requests import get_approval, pending_approvals
from longstep.humans.table import ApprovalTable
from longstep.artifacts import ARTIFACT_PREFIX, ArtifactStore
from longstep.errors import lock_wait_error_names, retryable_error_names
from longstep.humans.escalations import Resolution, pending_escalations, resolve
from longstep.inputs import StartInput, parse_model
from longstep.messages import tool_uses
from longstep.steps import PowertoolsStepLock
from longstep.store import CheckpointStore

ApproveMode = Literal["auto", "reject", "interactive", "external"]


class LocalRunError(RuntimeError):
    """A local run could not finish (for example it waited longer than its time limit)."""


@dataclass
class RunOptions:
    """How a local run behaves.

    Attributes:
        approve: ``auto`` applies the scenario's decisions (each to the scripted call it was
            written for) and approves the rest; an outcome-unknown escalation (the tool's probe
            could not tell, or it has none) is aborted, since a scripted human cannot look at the
            world and a guess would hide a lost effect or make a duplicate; other escalations are
            retried once, then aborted; ``reject`` rejects every request and
            aborts escalations; ``interactive`` asks; ``external`` answers nothing: someone else
            does, in this process (the ``longstep`` approval commands, the approval API's handler).
        run_id: the run id (defaults to the scenario's, else the scenario's name).
        execution_name: the first execution's name (defaults to the run id).
        faults: crashes to inject.
        restart_at: stop the execution when turn N starts and resume the run in a new one.
        throttle: the fraction of model and tool calls that fail with a throttling error.
        seed: makes ``throttle`` reproducible.
        emit: where progress lines go (None: silent).
        timeout_seconds: give up after this long.
        page_link: ``interactive``: the decision page's link of a request (the approval pages,
            ``local/pages_server.py``), printed with it.
    """

    approve: ApproveMode = "auto"
    run_id: str | None = None
    execution_name: str | None = None
    faults: list[Fault] = field(default_factory=list)
    restart_at: int | None = None
    throttle: float = 0.0
    seed: int = 0
    emit: Callable[[str], None] | None = None
    timeout_seconds: float = 300.0
    page_link: Callable[[str], str | None] | None = None


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


@dataclass
class _Session:
    """One local run in progress."""

    stack: LocalStack
    scenario: Scenario
    run_id: str
    options: RunOptions
    execution_name: str = ""
    executions: list[str] = field(default_factory=list)
    restarts_pending: int = 0
    restarts: int = 0
    # Set by the dispatcher after every invocation: the driver wakes to look, instead of polling
    # the tables in a tight loop and stealing the interpreter from the engine's threads.
    wake: threading.Event = field(default_factory=threading.Event)
    humans_needed: bool = False

    waiting_events: list[str] = field(default_factory=list)
    # Holds on the virtual clock while the driver has work a handler left it (signals to send,
    # humans to ask): time must not skip past a wait that is about to be answered.
    holds: int = 0
    _holds_lock: threading.Lock = field(default_factory=threading.Lock)

    def hold(self) -> None:
        with self._holds_lock:
            self.stack.clock.hold()
            self.holds += 1

    def release_holds(self, count: int | None = None) -> None:
        """Release ``count`` holds (all of them by default): the work they waited for is done."""
        with self._holds_lock:
            count = self.holds if count is None else min(count, self.holds)
            for _ in range(count):
                self.holds -= 1
                self.stack.clock.release()

    def on_invoke(self, inv: Any) -> None:
        task = inv.task
        requested = inv.result if task == "request_approval" and inv.error is None and isinstance(inv.result, dict) else {}
        if requested.get("status") == "pending" and self.options.approve in ("auto", "reject"):
            # Decided here, while the handler still runs (time cannot skip): the timeout cannot
            # beat an answer that is already given.
            _answer_approval(self, self.stack.client("stepfunctions"), requested["approval_id"])
        elif task in ("request_approval", "escalate"):
            self.humans_needed = True
            self.hold()  # after the flag: the driver releases only holds taken before its pass
        if task == "wait_for_event" and inv.result and inv.result.get("status") == "waiting":
            self.waiting_events.append(inv.result["event"])
            self.hold()
        self.wake.set()

    def emit(self, line: str) -> None:
        if self.options.emit:
            self.options.emit(line)

    @property
    def store(self) -> CheckpointStore:
        return CheckpointStore(self.stack.outputs["CheckpointTableName"], self.stack.client("dynamodb"))

    @property
    def approvals(self) -> ApprovalTable:
        return ApprovalTable(self.stack.outputs["ApprovalsTableName"], self.stack.client("dynamodb"))


def run_scenario(stack: LocalStack, scenario: Scenario, options: RunOptions | None = None) -> dict[str, Any]:
    """Run ``scenario`` to the end on ``stack`` and return the report."""
    options = options or RunOptions()
    stack.clock.rewind()  # every run starts at the stack's first instant (unless another is in flight)
    # A deterministic default: the same scenario gives the same ids, so transcripts compare.
    run_id = options.run_id or scenario.input.run_id or scenario.name
    session = _Session(stack, scenario, run_id, options, execution_name=options.execution_name or run_id)
    check_and_seed(stack, scenario, scenario.name)
    first_invocation = len(stack.dispatcher.invocations)
    injector = FaultInjector(
        plan=list(options.faults),
        lock=lambda: PowertoolsStepLock(stack.outputs["IdempotencyTableName"], stack.client("dynamodb")),
        restart_at=options.restart_at,
        on_restart=lambda _run: _stop_for_restart(session),
        throttle_rate=options.throttle,
        seed=options.seed,
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
        _send_signals(session, "start")
        session.release_holds()
        _drive(session)
    finally:
        session.release_holds()
        injector.uninstall()
        stack.dispatcher.after_invoke.remove(session.on_invoke)
        if hook:
            stack.dispatcher.after_invoke.remove(hook)
    report = build_report(stack, run_id, session.executions, first_invocation, time.perf_counter() - started)
    report["faults_injected"] = injector.injected
    # What really ran, crashed invocations included (the report's counts come from finished ones).
    report["model_calls"]["executed"] = injector.reached[faults.AFTER_MODEL]
    report["tool_calls"]["executed"] = injector.reached[faults.AFTER_EFFECT]
    report["executions"] = len(session.executions)
    report["restarts"] = session.restarts
    report["virtual_seconds"] = stack.clock.time() - virtual_start
    report["attempts"] = attempts_by_category(stack.dispatcher.invocations[first_invocation:], report)
    return report


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


def _stop_for_restart(session: _Session) -> None:
    session.stack.clock.hold()  # released once the new execution has started
    session.restarts_pending += 1
    session.restarts += 1
    session.emit("  -- restart: stopping the execution; a new one resumes the run")
    session.stack.client("stepfunctions").stop_execution(executionArn=session.executions[-1], error="LocalRestart", cause="--restart-at")


def _drive(session: _Session) -> None:
    """Answer approvals and escalations until the run's last execution ends; resume after restarts."""
    sfn = session.stack.client("stepfunctions")
    deadline = time.monotonic() + session.options.timeout_seconds
    while True:
        described = sfn.describe_execution(executionArn=session.executions[-1])
        status = described["status"]
        if status != "RUNNING":
            if status == "ABORTED" and session.restarts_pending:
                session.restarts_pending -= 1
                session.executions.append(client.resume(sfn, session.stack.state_machine_arn, session.execution_name))
                session.stack.clock.release()
                continue
            handed_to = json.loads(described.get("output") or "{}").get("continued_as") if status == "SUCCEEDED" else None
            if handed_to:  # continue-as-new: the run goes on in the next execution
                session.emit(f"  -- continued as a new execution (generation {handed_to.rsplit('--g', 1)[-1]})")
                session.executions.append(handed_to)
                continue
            return
        taken = session.holds  # the work behind these holds is done by the end of this pass
        if session.humans_needed:
            session.humans_needed = False
            if session.options.approve != "external":
                _answer_humans(session, sfn)
        while session.waiting_events:
            _send_signals(session, "waiting", session.waiting_events.pop(0))
        session.release_holds(taken)
        if time.monotonic() > deadline:
            sfn.stop_execution(executionArn=session.executions[-1], error="LocalTimeout", cause="local run exceeded its time limit")
            raise LocalRunError(f"run {session.run_id} still RUNNING after {session.options.timeout_seconds} s")
        session.wake.wait(0.05)
        session.wake.clear()


def _send_signals(session: _Session, at: str, event: str | None = None) -> None:
    """Deliver the scenario's signals that are due ``at`` this moment (for ``event``, if given)."""
    sfn = session.stack.client("stepfunctions")
    for signal in session.scenario.signals:
        if signal.at == at and (event is None or signal.event == event):
            outcome = signals.deliver(session.store, sfn, session.run_id, signal.event, signal.payload)
            session.emit(f"  signal {signal.event}: {outcome}")


def _answer_approval(session: _Session, sfn: Any, approval_id: str, request: dict[str, Any] | None = None) -> None:
    """Decide one request under the run's approve mode (a scripted timeout: leave it pending)."""
    request = request or get_approval(session.approvals, approval_id)
    if request.get("run_id", session.run_id) != session.run_id and session.options.approve == "auto":
        # A subagent's run: the scenario's decisions are keyed by the parent's scripted calls.
        decision: Decision | None = Decision(decision="approve", approver="local-auto")
    else:
        decision = choose_decision(session.scenario, session.store, request, session.options)
    if decision is None:  # nobody answers: the approval times out
        if session.options.approve == "interactive":  # decided on the page, or asked again while pending
            session.humans_needed = True
            session.hold()  # time stands still while a person decides
        return
    try:
        decide(session.approvals, sfn, approval_id, decision)
    except (ApprovalAlreadyDecidedError, ApprovalExpiredError) as exc:  # it timed out, or was answered elsewhere
        session.emit(f"  turn {request['turn']:<3} approval[{request['call']}]      not decided: {exc}")
        return
    session.emit(f"  turn {request['turn']:<3} approval[{request['call']}]      {decision.decision} ({request['tool']})")


def _answer_humans(session: _Session, sfn: Any) -> None:
    store = session.store
    for request in pending_approvals(session.approvals, session.run_id):
        _answer_approval(session, sfn, request["approval_id"], request)
    for run_id in _run_tree(store, session.run_id):  # the run's subagent runs escalate too
        for escalation in pending_escalations(store, run_id):
            resolution = choose_resolution(session, escalation)
            resolve(store, sfn, run_id, escalation["turn"], escalation["call"], resolution)
            session.emit(
                f"  turn {escalation['turn']:<3} escalation       {escalation['error']}: {resolution.action}"
                + ("" if resolution.happened is None else f" (happened: {resolution.happened})")
                + ("" if run_id == session.run_id else f" (child run {run_id})")
            )


def _run_tree(store: CheckpointStore, run_id: str) -> list[str]:
    """``run_id`` and the child runs it started, theirs too (``longstep.subagents``), parents first."""
    from longstep.tasks.subagents import children

    out, todo = [], [run_id]
    while todo:
        current = todo.pop(0)
        out.append(current)
        todo += [c["child_run_id"] for c in children(store, current) if c.get("child_run_id")]
    return out


def choose_decision(scenario: Scenario, store: CheckpointStore, request: dict[str, Any], options: RunOptions) -> Decision | None:
    """The decision for one pending approval under the run's approve mode (None: let it time out)."""
    if options.approve == "reject":
        return Decision(decision="reject", reason="rejected by --approve reject", approver="local-cli")
    if options.approve == "interactive":
        return _ask_approval(request, options.page_link(request["approval_id"]) if options.page_link else None)
    key = scripted_call_key(store, scenario, request)
    scripted: ScenarioDecision | None = scenario.approvals.get(key) if key else None
    if scripted is None:
        return Decision(decision="approve", approver="local-auto")
    if scripted.decision == "timeout":
        return None
    return Decision(**scripted.model_dump(exclude_none=True), approver="local-scenario")


def scripted_call_key(store: CheckpointStore, scenario: Scenario, request: dict[str, Any]) -> str | None:
    """The ``"turn:call"`` of the script that the requested call plays, read from the run's record.

    An injected fault (a replaced reply, a rejected answer) shifts the run's turns against the
    script's, so the run's turn number is not the script's: the recorded reply's tool-use id is
    (the scripted model names each call ``t<turn>c<call>``, or by the id the script gives it).
    None: the call is not from the script (an injected reply).
    """
    reply = store.get_step(request["run_id"], keys.model_step_key(int(request["turn"])))
    uses = tool_uses(reply.result["message"]) if reply is not None else []
    if int(request["call"]) >= len(uses):
        return None
    return scenario.call_ids().get(uses[int(request["call"])].get("toolUseId", ""))


def choose_resolution(session: _Session, escalation: dict[str, Any]) -> Resolution:
    """The answer to one escalation under the run's approve mode.

    ``auto`` never guesses whether an interrupted at-most-once call acted: the tool's probe
    answers that inside the runtime; when it cannot (or there is none), the run is aborted.
    """
    if session.options.approve == "interactive":
        return _ask_escalation(escalation)
    if session.options.approve == "auto" and escalation["error"] != "OutcomeUnknownError" and escalation["times"] == 1:
        return Resolution(action="retry", resolver="local-auto")  # looked at it once: try again
    return Resolution(action="abort", resolver="local-auto")


def _ask_approval(request: dict[str, Any], link: str | None = None) -> Decision | None:
    print(f"\napproval needed: {request['tool']} {json.dumps(request['input'])}", file=sys.stderr)
    if link:
        print(f"decide in a browser: {link}", file=sys.stderr)
    while True:
        answer = input("[a]pprove, [r]eject, [e]dit" + (", or Enter once decided in the browser" if link else "") + "? ").strip().lower()
        if link and not answer:
            return None  # decided on the page (if not, it is asked again while it is pending)
        if answer.startswith("a"):
            return Decision(decision="approve", approver="local-interactive")
        if answer.startswith("r"):
            return Decision(decision="reject", reason=input("reason: ") or "rejected", approver="local-interactive")
        if answer.startswith("e"):
            try:
                return Decision(decision="edit", input=json.loads(input("new arguments (JSON): ")), approver="local-interactive")
            except (json.JSONDecodeError, ValueError) as exc:
                print(f"not accepted: {exc}", file=sys.stderr)


def _ask_escalation(escalation: dict[str, Any]) -> Resolution:
    print(f"\nescalation: {escalation['task']} turn {escalation['turn']}: {escalation['error']}: {escalation['reason']}", file=sys.stderr)
    while True:
        answer = input("[r]etry, retry as [n]ot happened, [s]kip with a result, [a]bort? ").strip().lower()
        if answer.startswith("r"):
            return Resolution(action="retry", resolver="local-interactive")
        if answer.startswith("n"):
            return Resolution(action="retry", happened=False, resolver="local-interactive")
        if answer.startswith("a"):
            return Resolution(action="abort", resolver="local-interactive")
        if answer.startswith("s"):
            try:
                return Resolution(action="skip", result=json.loads(input("result (JSON): ")), happened=True, resolver="local-interactive")
            except (json.JSONDecodeError, ValueError) as exc:
                print(f"not accepted: {exc}", file=sys.stderr)
