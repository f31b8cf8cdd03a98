"""A local run in progress, of either kind (an agent scenario: ``local/runner.py``; a workflow
scenario: ``local/workflow_run.py``): what the driver loop and the dispatcher's hooks share. The
run's executions and restarts, the scenario's signals it delivers, its progress lines."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from longstep.humans import signals
from longstep.humans.table import ApprovalTable
from longstep.store import CheckpointStore
from longstep_kit.local.run_options import RunOptions
from longstep_kit.local.stack import LocalStack

# The longest the driver goes without asking for its execution's status (wall seconds).
LOOK_EVERY = 1.0


@dataclass
class LocalSession:
    """One local run in progress.

    Attributes:
        stack: the local stack it runs on.
        scenario: the scenario it plays (anything with ``signals``: a list of ``ScenarioSignal``).
        run_id: the run's id.
        options: how it behaves.
        executions: the ARNs of the run's executions so far, the current one last.
        restarts: how many times ``--restart-at`` stopped an execution.
        restarts_pending: stopped executions the driver has not yet followed with a new one.
        wake: set by the dispatcher's hook after every invocation.
    """

    stack: LocalStack
    scenario: Any
    run_id: str
    options: RunOptions
    executions: list[str] = field(default_factory=list)
    restarts: int = 0
    restarts_pending: int = 0
    # The driver waits on this to look, instead of polling the tables in a tight loop and
    # stealing the interpreter from the engine's threads.
    wake: threading.Event = field(default_factory=threading.Event)
    # Set when an execution of the stack ends (``LocalStack.execution_ends``): the driver asks
    # DescribeExecution then, not on every pass.
    ended: threading.Event = field(default_factory=threading.Event)

    def on_execution_end(self) -> None:
        """The stack's hook: an execution ended; the driver looks at its status."""
        self.ended.set()
        self.wake.set()

    def time_to_look(self, last_look: float) -> bool:
        """Whether the driver asks DescribeExecution now: an execution ended since it last did,
        or ``LOOK_EVERY`` seconds passed (a bound, should an end go unannounced)."""
        if self.ended.is_set() or time.monotonic() - last_look >= LOOK_EVERY:
            self.ended.clear()  # before the look: an end after it sets the flag again
            return True
        return False

    def emit(self, line: str) -> None:
        """Print a progress line (where ``options.emit`` says; nowhere if None)."""
        if self.options.emit:
            self.options.emit(line)

    @property
    def store(self) -> CheckpointStore:
        """The stack's checkpoint table."""
        return CheckpointStore(self.stack.outputs["CheckpointTableName"], self.stack.client("dynamodb"))

    @property
    def approvals(self) -> ApprovalTable:
        """The stack's approvals table."""
        return ApprovalTable(self.stack.outputs["ApprovalsTableName"], self.stack.client("dynamodb"))

    def stop_for_restart(self) -> None:
        """``--restart-at``: stop the run's execution (the invocation that got here finishes its
        step); the driver starts the next one once it has stopped, then releases the clock."""
        self.stack.clock.hold()  # released once the new execution has started
        self.restarts_pending += 1
        self.restarts += 1
        self.emit("  -- restart: stopping the execution; a new one resumes the run")
        self.stack.client("stepfunctions").stop_execution(executionArn=self.executions[-1], error="LocalRestart", cause="--restart-at")

    def send_signals(self, at: str, event: str | None = None) -> None:
        """Deliver the scenario's signals that are due ``at`` this moment (for ``event``, if given)."""
        sfn = self.stack.client("stepfunctions")
        for signal in self.scenario.signals:
            if signal.at == at and (event is None or signal.event == event):
                outcome = signals.deliver(self.store, sfn, self.run_id, signal.event, signal.payload)
                self.emit(f"  signal {signal.event}: {outcome}")
