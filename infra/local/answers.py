"""How a local agent run answers its humans' part under ``RunOptions.approve``: approval requests
get the scenario's decision for the scripted call they come from (else approve), or a rejection,
or a person's answer at the terminal; escalations are retried once then aborted, or asked about.
``external`` answers nothing here: someone else does."""

from __future__ import annotations

import json
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

from longstep import keys
from longstep.errors import ApprovalAlreadyDecidedError, ApprovalExpiredError
from longstep.humans.decisions import Decision, decide
from longstep.humans.escalations import NO_SKIP_STEPS, Resolution, pending_escalations, resolve
from longstep.humans.requests import get_approval, pending_approvals
from longstep.errors import WaitClosedError
from longstep.messages import tool_uses
from longstep.store import CheckpointStore
from longstep_kit.local.run_options import RunOptions
from longstep_kit.local.scenario import Scenario, ScenarioDecision
from longstep_kit.local.session import LocalSession


@dataclass
class AgentSession(LocalSession):
    """One local agent run in progress: what its driver (``_drive``) and its dispatcher hook
    (``on_invoke``) share, beyond any local run's (``LocalSession``)."""

    scenario: Scenario
    execution_name: str = ""
    humans_needed: bool = False
    waiting_events: list[str] = field(default_factory=list)
    # Holds on the virtual clock while the driver has work a handler left it (signals to send,
    # humans to ask): time must not skip past a wait that is about to be answered.
    holds: int = 0
    paused_holds: int = 0  # held from a Pause until the run's next model turn
    _holds_lock: threading.Lock = field(default_factory=threading.Lock)

    def hold(self) -> None:
        """Hold the virtual clock until the driver's next pass is done."""
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
        """The dispatcher's hook: note the humans and events a task left waiting, and wake the driver."""
        task = inv.task
        requested = inv.result if task == "request_approval" and inv.error is None and isinstance(inv.result, dict) else {}
        if requested.get("status") == "pending" and self.options.approve in ("auto", "reject"):
            # Decided here, while the handler still runs (time cannot skip): the timeout cannot
            # beat an answer that is already given.
            answer_approval(self, self.stack.client("stepfunctions"), requested["approval_id"])
        elif task in ("request_approval", "escalate"):
            self.humans_needed = True
            self.hold()  # after the flag: the driver releases only holds taken before its pass
        if task == "wait_for_event" and inv.result and inv.result.get("status") == "waiting":
            self.waiting_events.append(inv.result["event"])
            self.hold()
        self._hold_while_paused(inv)
        self.wake.set()

    def release_paused_holds(self) -> None:
        """Release the clock held for a pause (the run ended while paused: it was stopped)."""
        with self._holds_lock:
            while self.paused_holds:
                self.paused_holds -= 1
                self.stack.clock.release()

    def _hold_while_paused(self, inv: Any) -> None:
        """A paused run waits for whoever resumes it (``longstep resume``), not for a timer: the
        virtual clock stands still from its Pause until its next model turn (days pass only by
        ``local advance``), as it does while a person decides."""
        result = inv.result if inv.error is None and isinstance(inv.result, dict) else {}
        if inv.task == "pause" and result.get("status") == "paused":
            with self._holds_lock:
                self.stack.clock.hold()
                self.paused_holds += 1
        elif inv.task == "model_turn" and result.get("route") != "pause" and self.paused_holds:
            with self._holds_lock:
                self.paused_holds -= 1
                self.stack.clock.release()


def answer_approval(session: AgentSession, sfn: Any, approval_id: str, request: dict[str, Any] | None = None) -> None:
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


def answer_humans(session: AgentSession, sfn: Any) -> None:
    """Answer the run's pending approvals, then the escalations of the run and of its child runs."""
    store = session.store
    for request in pending_approvals(session.approvals, session.run_id):
        answer_approval(session, sfn, request["approval_id"], request)
    for run_id in _run_tree(store, session.run_id):  # the run's subagent runs escalate too
        for escalation in pending_escalations(store, run_id):
            resolution = choose_resolution(session, escalation)
            try:
                resolve(store, sfn, run_id, escalation["turn"], escalation["call"], resolution)
            except WaitClosedError as exc:  # its execution stopped meanwhile: a resumed run asks again
                session.emit(f"  turn {escalation['turn']:<3} escalation       not answered: {exc}")
                continue
            session.emit(
                f"  turn {escalation['turn']:<3} escalation       {escalation['error']}: {resolution.action}"
                + ("" if resolution.happened is None else f" (happened: {resolution.happened})")
                + ("" if run_id == session.run_id else f" (child run {run_id})")
            )


def _run_tree(store: CheckpointStore, run_id: str) -> list[str]:
    """``run_id`` and the child runs it started, theirs too (``longstep.subagents``), parents first."""
    from longstep.child_runs import children

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


def choose_resolution(session: AgentSession, escalation: dict[str, Any]) -> Resolution:
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
    skippable = escalation["task"] not in NO_SKIP_STEPS  # the others refuse a skip (no result to give)
    while True:
        answer = input("[r]etry, retry as [n]ot happened, " + ("[s]kip with a result, " if skippable else "") + "[a]bort? ").strip().lower()
        if answer.startswith("r"):
            return Resolution(action="retry", resolver="local-interactive")
        if answer.startswith("n"):
            return Resolution(action="retry", happened=False, resolver="local-interactive")
        if answer.startswith("a"):
            return Resolution(action="abort", resolver="local-interactive")
        if skippable and answer.startswith("s"):
            try:
                return Resolution(action="skip", result=json.loads(input("result (JSON): ")), happened=True, resolver="local-interactive")
            except (json.JSONDecodeError, ValueError) as exc:
                print(f"not accepted: {exc}", file=sys.stderr)
