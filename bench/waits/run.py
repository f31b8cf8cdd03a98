"""One Longstep run that waits 3 days, measured: its scenario, the probes that time it, its counts.

A two-turn run whose only tool call waits for an approval (``RequestApproval``) or an event
(``wait_for`` -> ``WaitForEvent``), both task tokens. The bench holds the local stack's virtual
clock while the run parks, advances it 3 days, then decides or delivers the signal, and reads
from the execution's history what the engine did during the wait and how soon the run went on.
The whole bench runs from ``bench/waits/main.py``; the poller it is set against is in
``bench/waits/polling.py``.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from bench.waits.params import EVENT, EVENT_TIMEOUT_SECONDS, WAIT_SECONDS

SIGNAL = {"status": "green", "build": 42}


# -- scenarios -------------------------------------------------------------------------------


def scenario(kind: str) -> Any:
    """A two-turn run whose only tool call waits: an email needing approval, or a wait_for event."""
    from longstep_kit.local.scenario import Scenario

    if kind == "approval":
        call = {
            "name": "send_email",
            "input": {"to": "payments-oncall@example.com", "subject": "Checkout incident", "body": "The provider timeout caused the outage."},
        }
        final = "Summary: the on-call was emailed once the approval came, three days later."
    else:
        call = {"name": "wait_for", "input": {"event": EVENT, "match": {"status": "green"}, "timeout_seconds": EVENT_TIMEOUT_SECONDS}}
        final = "Summary: CI finished green (build 42) after three days; nothing else to do."
    text = "Asking to email the on-call." if kind == "approval" else "Waiting for CI."
    return Scenario.model_validate(
        {
            "name": f"bench-waits-{kind}",
            "description": f"one tool call that waits 3 days ({kind}), then a summary",
            "input": {
                "goal": "Tell the on-call about the checkout incident." if kind == "approval" else "Ship once CI is green.",
                "agent": "triage",
                "max_turns": 3,
            },
            "turns": {"0": {"text": text, "tool_calls": [call]}, "1": {"text": final}},
        }
    )


# -- one Longstep run --------------------------------------------------------------------------


class TimedSfn:
    """The Step Functions client, with the time of the ``SendTaskSuccess`` request noted."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.sent_at: float | None = None
        self.returned_at: float | None = None

    def send_task_success(self, **kwargs: Any) -> Any:
        self.sent_at = time.perf_counter()
        try:
            return self._client.send_task_success(**kwargs)
        finally:
            self.returned_at = time.perf_counter()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


class ParkProbe:
    """A dispatcher hook: notes when the waiting task of ``run_id`` has parked on its token."""

    def __init__(self, kind: str, run_id: str) -> None:
        self.kind, self.run_id = kind, run_id
        self.parked = threading.Event()
        self.at: float | None = None
        self.result: dict[str, Any] = {}

    def on_invoke(self, inv: Any) -> None:
        task = inv.task
        result = inv.result if isinstance(inv.result, dict) and inv.error is None else {}
        if result.get("run_id") != self.run_id or self.parked.is_set():
            return
        if (self.kind == "approval" and task == "request_approval" and result.get("status") == "pending") or (
            self.kind == "event" and task == "wait_for_event" and result.get("status") == "waiting"
        ):
            self.at = time.perf_counter()
            self.result = result
            self.parked.set()


def _history(sfn: Any, arn: str) -> list[dict[str, Any]]:
    from bench.waits.polling import history

    return history(sfn, arn)


def _execution_arn(stack: Any, name: str) -> str:
    return stack.state_machine_arn.replace(":stateMachine:", ":execution:") + ":" + name


def measure_wait(stack: Any, starts: Any, kind: str, run_id: str) -> dict[str, Any]:
    """One run that waits ``WAIT_SECONDS`` virtual seconds for ``kind``; the counts and the reaction."""
    from longstep_kit.local.runner import RunOptions, run_scenario
    from longstep.humans import signals
    from longstep.humans.decisions import Decision, decide
    from longstep.humans.table import ApprovalTable
    from longstep.store import CheckpointStore

    sfn = stack.client("stepfunctions")
    probe = ParkProbe(kind, run_id)
    outcome: dict[str, Any] = {}

    def background() -> None:
        try:
            outcome["report"] = run_scenario(stack, scenario(kind), RunOptions(run_id=run_id, approve="external", timeout_seconds=120))
        except BaseException as exc:  # noqa: BLE001 - reported below
            outcome["error"] = exc

    stack.dispatcher.after_invoke.append(probe.on_invoke)
    clock_before = stack.clock.skipped_seconds
    thread = threading.Thread(target=background, daemon=True)
    # The bench holds the clock: nothing skips while the run parks; then it moves time 3 days
    # ahead itself (the timers due by then would fire: the timeouts are later, 4 and 7 days).
    stack.clock.hold()
    try:
        thread.start()
        if not probe.parked.wait(60):
            raise RuntimeError(f"{run_id}: the {kind} wait never started: {outcome.get('error')}")
        virtual_at_park = stack.clock.time()
        stack.clock.advance(WAIT_SECONDS)
        virtual_waited = stack.clock.time() - virtual_at_park
        t0 = time.perf_counter()
        timed = TimedSfn(sfn)
        if kind == "approval":
            table = ApprovalTable(stack.outputs["ApprovalsTableName"], stack.client("dynamodb"))
            decide(table, timed, probe.result["approval_id"], Decision(decision="approve", approver="bench-waits"))
            delivered = "decided"
        else:
            store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
            delivered = signals.deliver(store, timed, run_id, EVENT, SIGNAL)
        t_call_done = time.perf_counter()
    finally:
        stack.clock.release()
        stack.dispatcher.after_invoke.remove(probe.on_invoke)
    thread.join(120)
    if thread.is_alive():
        raise RuntimeError(f"{run_id}: the run did not finish")
    if "error" in outcome:
        raise outcome["error"]
    report = outcome["report"]
    # The wait, as the execution recorded it: from the task parking on its token (TaskSubmitted)
    # to the token's answer arriving (TaskSucceeded). Everything the engine did in between is there.
    events = _history(sfn, _execution_arn(stack, run_id))
    submitted = [i for i, e in enumerate(events) if e["type"] == "TaskSubmitted"]
    if len(submitted) != 1:
        raise RuntimeError(f"{run_id}: expected one task-token wait, found {len(submitted)}")
    ended = next(i for i in range(submitted[0] + 1, len(events)) if events[i]["type"] in ("TaskSucceeded", "TaskFailed", "TaskTimedOut"))
    during = events[submitted[0] + 1 : ended]
    engine_wait = (events[ended]["timestamp"] - events[submitted[0]]["timestamp"]).total_seconds()
    invoked_during = starts.between(probe.at, t0)
    nxt = starts.first_after(t0)
    return {
        "run_id": run_id,
        "kind": kind,
        "status": report["status"],
        "delivered": delivered,
        "wait": {
            "virtual_seconds_target": WAIT_SECONDS,
            "wall_seconds": round(t0 - probe.at, 4),
            "virtual_seconds_on_local_clock": round(virtual_waited),
            "history_wall_seconds": round(engine_wait, 4),
            "ended_by": events[ended]["type"],
            "lambda_invocations": len(invoked_during),
            "state_transitions": sum(1 for e in during if e["type"].endswith("StateEntered")),
            "history_events": len(during),
            "history_event_types": sorted({e["type"] for e in during}),
            "engine_virtual_seconds_skipped": stack.clock.skipped_seconds - clock_before,
        },
        "reaction": {
            "next_handler": nxt.handler if nxt else None,
            "from_call_seconds": round(nxt.start - t0, 5) if nxt else None,
            "from_send_task_success_seconds": round(nxt.start - timed.sent_at, 5) if nxt and timed.sent_at else None,
            "call_seconds": round(t_call_done - t0, 5),
            "before_send_task_success_seconds": round(timed.sent_at - t0, 5) if timed.sent_at else None,
        },
        "run": {
            "lambda_invocations": report["lambda_invocations"],
            "state_transitions": report["state_transitions"],
            "history_events": report["history_events"],
            "wall_seconds": report["wall_seconds"],
            "output": report.get("output"),
        },
    }
