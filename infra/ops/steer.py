"""Steering runs from outside: the operations behind ``longstep send|pause|resume|stop``, the
double-texting policies of ``start``, the run UI's buttons and the Python client.

Each writes the durable input the run takes at its next step boundary (``longstep.steering``),
says so in the run's event stream, and wakes what would otherwise sleep through it: a paused
run's token, and for a stop (or an interrupt) the approvals and event waits the run is parked on
(their calls are then recorded as cancelled), and the run's children.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from longstep import clock, events, keys, steering
from longstep.contract.run import RunRecord
from longstep.errors import LongstepError
from longstep.humans import signals
from longstep.store import CheckpointStore
from longstep_kit.ops import runs

# What ``start`` does when the run id is already running (LangGraph's "double texting").
REJECT, ENQUEUE, INTERRUPT = "reject", "enqueue", "interrupt"
POLICIES = (REJECT, ENQUEUE, INTERRUPT)


class RunNotRunningError(LongstepError):
    """The run has no running execution: nothing would take the input."""


class RunIsRunningError(LongstepError):
    """A start named a run that exists: running (under the ``reject`` policy) or ended."""


@dataclass
class Steering:
    """Steering for one deployment's runs.

    Args:
        store: the checkpoint store.
        sfn: a Step Functions client.
        state_machine_arn: the agent state machine.
        approvals: the approvals table (None: pending approvals are not woken by a stop).
        who: who steers (recorded with messages and in the event stream).
    """

    store: CheckpointStore
    sfn: Any
    state_machine_arn: str
    approvals: Any = None
    who: str = "cli"

    def _status(self, run_id: str) -> str:
        try:
            return runs.latest_execution(self.sfn, self.state_machine_arn, run_id)["status"]
        except runs.RunNotFoundError:
            raise RunNotRunningError(f"run_id: no run named {run_id!r}") from None

    def _running(self, run_id: str, what: str) -> None:
        status = self._status(run_id)
        if status != "RUNNING":
            raise RunNotRunningError(f"run {run_id} is {status.lower()}: {what}")

    def _tell(self, run_id: str, type_: str, **data: Any) -> None:
        events.EventLog(self.store).append(run_id, [{"type": type_, "at": clock.now(), "run_id": run_id, "by": self.who, **data}])

    def send(self, run_id: str, text: str) -> int:
        """Queue a message for the run's next model turn; returns its place in the inbox."""
        self._running(run_id, "nothing would read the message (resume it first, or start a new run)")
        index = steering.send(self.store, run_id, text, self.who)
        self._tell(run_id, "message.sent", index=index, text=text)
        return index

    def pause(self, run_id: str) -> bool:
        """Pause the run at its next model turn; False when it was paused already."""
        self._running(run_id, "there is nothing to pause")
        changed = steering.pause(self.store, run_id)
        if changed:
            self._tell(run_id, "pause.requested")
        return changed

    def unpause(self, run_id: str) -> bool:
        """Resume a paused run where it paused; False when it was not paused."""
        changed = steering.unpause(self.store, self.sfn, run_id)
        if changed:
            self._tell(run_id, events.RUN_UNPAUSED)
        return changed

    def resume(self, run_id: str, force: bool = False) -> str:
        """``longstep resume``: continue a paused run, or start a new execution of a failed or stopped one.

        Returns:
            ``unpaused`` or the new execution's ARN.
        """
        asked = RunRecord.from_dict(self.store.get(run_id, keys.RUN_RECORD) or {}).steering
        if asked.paused and self._status(run_id) == "RUNNING":
            self.unpause(run_id)
            return "unpaused"
        stopped = asked.stop_reason is not None
        if stopped:
            steering.clear_stop(self.store, run_id)
        return runs.resume(self.sfn, self.state_machine_arn, run_id, force=force or stopped)

    def stop(self, run_id: str, reason: str = "stopped by the user") -> list[str]:
        """Stop the run, and its children, at their next step boundary; returns the runs asked to stop."""
        self._running(run_id, "there is nothing to stop")
        return self._stop_tree(run_id, reason)

    def _stop_tree(self, run_id: str, reason: str) -> list[str]:
        steering.stop(self.store, run_id, reason)
        self._tell(run_id, "stop.requested", reason=reason)
        self._wake(run_id, reason)
        if hasattr(self.store, "client"):  # waiting for a concurrency slot: woken without one (longstep.concurrency)
            from longstep.concurrency import Slots

            Slots(self.store.client, self.store.table_name, self.sfn, 0).wake_stopped(self.store.get(run_id, keys.RUN_RECORD) or {}, run_id)
        stopped = [run_id]
        from longstep.child_runs import children

        for child in children(self.store, run_id):
            if child["status"] == "running" and child.get("child_run_id"):
                stopped += self._stop_tree(str(child["child_run_id"]), f"its parent {run_id} was stopped")
        return stopped

    def interrupt(self, run_id: str, text: str) -> int:
        """Cancel the current turn's calls not yet run and give the model ``text`` at once."""
        index = self.send(run_id, text)
        steering.interrupt(self.store, run_id)
        self._tell(run_id, "interrupt.requested", index=index)
        self._wake(run_id, "interrupted by a new message")
        return index

    def _wake(self, run_id: str, reason: str) -> None:
        """Hand back what the run is parked on, so that it reaches its next step boundary now."""
        if RunRecord.from_dict(self.store.get(run_id, keys.RUN_RECORD) or {}).steering.paused:
            steering.unpause(self.store, self.sfn, run_id)  # ModelTurn then sees the stop first
        if self.approvals is not None:
            from longstep.humans.budget_asks import is_budget_ask
            from longstep.humans.decisions import Decision, decide
            from longstep.humans.requests import pending_approvals

            for request in pending_approvals(self.approvals, run_id):
                if is_budget_ask(request):
                    continue  # no task waits on it (it has no token): the run's Finish closes it
                try:
                    decide(self.approvals, self.sfn, request["approval_id"], Decision(decision="reject", reason=reason, approver=self.who))
                except LongstepError:  # decided or expired meanwhile: the call is settled either way
                    pass
        for record in self.store.query_prefix(run_id, keys.SIGNAL_PREFIX):
            for _slot, token, _match in signals.waiters(record):  # every parked wait of the event
                try:
                    self.sfn.send_task_success(taskToken=token, output=json.dumps({"payload": {"cancelled": reason}}))
                except Exception as exc:  # noqa: BLE001 - a wait already over
                    if not signals.dead_token(exc):
                        raise

    def start(self, payload: dict[str, Any], policy: str = REJECT) -> str:
        """Start a run; if its id is running, follow ``policy`` (the new goal as a message, or an interrupt).

        Returns:
            The new execution's ARN, or ``enqueued`` / ``interrupted``.

        Raises:
            RunIsRunningError: the run is running and the policy is ``reject``.
        """
        run_id = payload["run_id"]
        try:
            status = self._status(run_id)
        except RunNotRunningError:  # a new run id
            from longstep.pinning import alias_arn

            target = alias_arn(self.state_machine_arn)
            return self.sfn.start_execution(stateMachineArn=target, name=run_id, input=json.dumps(payload))["executionArn"]
        if status != "RUNNING":
            raise RunIsRunningError(
                f"run_id: run {run_id} exists ({status.lower()}); continue it with `longstep resume {run_id}` or start another id"
            )
        if policy == ENQUEUE:
            self.send(run_id, payload["goal"])
            return "enqueued"
        if policy == INTERRUPT:
            self.interrupt(run_id, payload["goal"])
            return "interrupted"
        raise RunIsRunningError(f"run_id: run {run_id} is running; send it a message (`longstep send`) or pass --if-running enqueue|interrupt")
