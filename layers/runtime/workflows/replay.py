"""Execution by replay: one invocation re-runs the workflow function from the top against its log.

Each context call takes the next position (``seq``). A recorded position returns its record
(after checking that the code asks for the same kind and name there); the first unrecorded step
is executed under the step lock and recorded (``longstep.steps.run_step``), and the invocation
then ends with ``continue``, so every step is one Lambda invocation the console shows. A wait
ends the invocation with a directive the state machine performs (a Wait state, or a task token
for an approval or a signal); the next invocation finds the wait's outcome and goes on.

Suspending is an exception (``Suspend``) derived from BaseException, so a workflow's own
``except Exception`` cannot swallow it.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import json
import math
import random as _random
import uuid as _uuid
from dataclasses import dataclass
from typing import Any, Callable

from longstep import clock, faults, keys
from longstep.errors import LongstepError, NonDeterminismError, TransientError
from longstep.steps import StepLock, run_step
from longstep.store import AlreadyRecordedError, StepRecord, StepStore
from longstep.workflows import log
from longstep.workflows.context import Call, StepFailedError, WorkflowContext
from longstep.workflows.effects import run_effect

# Step Functions' payload limit is 256 KB; an output above this stays in the log only.
MAX_INLINE_OUTPUT_BYTES = 200 * 1024


class Suspend(BaseException):
    """Ends the invocation with ``directive`` (not an error: the run goes on after it)."""

    def __init__(self, directive: dict[str, Any]) -> None:
        super().__init__(directive.get("next"))
        self.directive = directive


@dataclass(frozen=True)
class Resume:
    """The outcome of the wait the previous directive asked for (a decision, a signal)."""

    seq: int
    kind: str
    value: Any


@dataclass(frozen=True)
class Defaults:
    """Timeouts of waits that name none."""

    approval_timeout_seconds: int = 7 * 86_400
    event_timeout_seconds: int = 7 * 86_400


class Replay:
    """One pass of a workflow function over its log.

    Args:
        store: the checkpoint store.
        lock: the step lock (concurrent duplicate invocations of one step).
        run_id: the run.
        records: the run's recorded calls (``wf#step#`` records), in key order.
        resume: the outcome of the wait the run was suspended at, if any.
        defaults: wait timeouts.
        now: the clock.
        replay_only: check the code against a recorded run: a call the record does not hold
            is non-determinism (nothing executes, nothing is recorded).
        consult_answers: look for a human's answer to an escalation of the step it executes.
    """

    def __init__(
        self,
        store: StepStore,
        lock: StepLock,
        run_id: str,
        records: list[StepRecord],
        resume: Resume | None = None,
        defaults: Defaults = Defaults(),
        now: Callable[[], float] = clock.now,
        replay_only: bool = False,
        consult_answers: bool = False,
    ) -> None:
        self.store, self.lock, self.run_id = store, lock, run_id
        self.top: dict[int, StepRecord] = {}
        self.branches: dict[tuple[int, int], StepRecord] = {}
        for record in records:
            seq, branch = log.parse_step_key(record.sk)
            if branch is None:
                self.top[seq] = record
            else:
                self.branches[(seq, branch)] = record
        self.resume = resume
        self.defaults = defaults
        self.clock = now
        self.seq = 0
        self.executed = 0  # steps executed by this invocation
        self.replay_only = replay_only
        self.consult_answers = consult_answers

    # -- positions ------------------------------------------------------------------------

    def _next(self, kind: str, name: str) -> tuple[int, StepRecord | None]:
        self.seq += 1
        record = self.top.get(self.seq)
        if record is not None:
            check(record, self.seq, kind, name)
        elif self.replay_only:
            raise NonDeterminismError(
                f"workflow run {self.run_id}: the code asks for {kind}:{name} at position {self.seq}, which the recorded run never reached"
            )
        return self.seq, record

    def _record(self, seq: int, kind: str, name: str, value: Any) -> Any:
        """Record a call's outcome once; a concurrent invocation's record wins and is returned."""
        try:
            self.store.record_step(self.run_id, log.step_key(seq), kind, name, value)
        except AlreadyRecordedError:
            winner = self.store.get_step(self.run_id, log.step_key(seq))
            assert winner is not None
            check(winner, seq, kind, name)
            value = winner.result
        self.top[seq] = StepRecord(log.step_key(seq), kind, name, value)
        return value

    def finish_check(self) -> None:
        """The function returned: every recorded position must have been asked for again."""
        later = sorted(s for s in self.top if s > self.seq)
        if later:
            extra = self.top[later[0]]
            raise NonDeterminismError(
                f"workflow run {self.run_id}: position {later[0]} was recorded as {extra.kind}:{extra.name} "
                f"but the code now returns after position {self.seq}"
            )

    # -- steps ----------------------------------------------------------------------------

    def step(self, call: Call) -> Any:
        seq, record = self._next(log.STEP, call.step_name)
        if record is None:
            if self.executed:
                raise Suspend({"next": log.CONTINUE})
            self.executed += 1
            outcome = self._run(call, seq, None)
            record = self.top[seq] = StepRecord(log.step_key(seq), log.STEP, call.step_name, outcome)
        return unwrap(call.step_name, record.result)

    def parallel(self, calls: list[Call]) -> list[Any]:
        names = [c.step_name for c in calls]
        seq, record = self._next(log.PARALLEL, "parallel:" + ",".join(names))
        if record is None:
            pending = []
            outcomes: list[Any] = [None] * len(calls)
            for index, call in enumerate(calls):
                done = self.branches.get((seq, index))
                if done is not None:
                    check(done, seq, log.STEP, call.step_name, index)
                    outcomes[index] = done.result
                else:
                    pending.append(index)
            if pending:
                if self.executed:
                    raise Suspend({"next": log.CONTINUE})
                self.executed += 1
                # Each branch in a copy of this context: the function's environment (and, locally,
                # its role) are context variables that threads do not inherit.
                with concurrent.futures.ThreadPoolExecutor(max_workers=min(len(pending), 10)) as pool:
                    futures = {i: pool.submit(contextvars.copy_context().run, self._run, calls[i], seq, i) for i in pending}
                    for i, future in futures.items():
                        outcomes[i] = future.result()
            self._record(seq, log.PARALLEL, "parallel:" + ",".join(names), outcomes)
            record = self.top[seq]
        results = []
        for name, outcome in zip(names, record.result):
            results.append(unwrap(name, outcome))
        return results

    def _run(self, call: Call, seq: int, branch: int | None) -> Any:
        """Execute one step under the lock and record it (or return a concurrent winner's record)."""
        lock_key = keys.idempotency_key(self.run_id, seq, branch)
        outcome = run_step(
            self.store,
            self.lock,
            run_id=self.run_id,
            sk=log.step_key(seq, branch),
            kind=log.STEP,
            name=call.step_name,
            lock_key=lock_key,
            execute=lambda: run_effect(self.store, self.run_id, seq, branch, call, lock_key, self.consult_answers),
        )
        faults.reach(faults.AFTER_TOOL, self.run_id, seq, branch)
        return outcome.result

    # -- waits ----------------------------------------------------------------------------

    def sleep(self, seconds: int, kind: str) -> None:
        seq, record = self._next(kind, kind)
        now = self.clock()
        wake_at = record.result["wake_at"] if record is not None else self._record(seq, kind, kind, {"wake_at": now + seconds})["wake_at"]
        remaining = math.ceil(wake_at - now)
        if remaining > 0:
            raise Suspend({"next": log.WAIT, "seq": seq, "seconds": remaining})

    def approval(self, name: str, details: dict[str, Any], timeout_seconds: int | None) -> dict[str, Any]:
        seq, record = self._next(log.APPROVAL, name)
        if record is not None:
            return record.result
        resumed = self._resumed(seq, log.APPROVAL)
        if resumed is not None:
            return self._record(seq, log.APPROVAL, name, resumed)
        timeout = int(timeout_seconds or self.defaults.approval_timeout_seconds)
        raise Suspend({"next": log.APPROVE, "seq": seq, "name": name, "details": details, "timeout_seconds": timeout})

    def event(self, name: str, match: dict[str, Any], timeout_seconds: int | None) -> Any:
        seq, record = self._next(log.EVENT, name)
        if record is None:
            resumed = self._resumed(seq, log.EVENT)
            if resumed is None:
                timeout = int(timeout_seconds or self.defaults.event_timeout_seconds)
                raise Suspend({"next": log.SIGNAL, "seq": seq, "event": name, "match": match, "timeout_seconds": timeout})
            self._record(seq, log.EVENT, name, resumed)
            record = self.top[seq]
        return (record.result or {}).get("payload")

    def agent(self, name: str, goal: str, inputs: dict[str, Any]) -> Any:
        seq, record = self._next(log.AGENT, name)
        if record is None:
            resumed = self._resumed(seq, log.AGENT)
            if resumed is None:
                raise Suspend({"next": log.DELEGATE, "seq": seq, "agent": name, "goal": goal, "inputs": inputs})
            self._record(seq, log.AGENT, name, child_outcome(name, resumed))
            record = self.top[seq]
        return unwrap(name, record.result)

    def _resumed(self, seq: int, kind: str) -> Any:
        if self.resume is not None and self.resume.seq == seq and self.resume.kind == kind:
            return self.resume.value
        return None

    # -- values that must replay ----------------------------------------------------------

    def _value(self, kind: str, make: Callable[[], Any]) -> Any:
        seq, record = self._next(kind, kind)
        return record.result if record is not None else self._record(seq, kind, kind, make())

    def now(self) -> float:
        return self._value(log.NOW, self.clock)

    def random(self) -> float:
        return self._value(log.RANDOM, _random.random)

    def uuid(self) -> str:
        return self._value(log.UUID, lambda: str(_uuid.uuid4()))


def check(record: StepRecord, seq: int, kind: str, name: str, branch: int | None = None) -> None:
    """Raise NonDeterminismError unless the record at ``seq`` is the call the code makes there."""
    if record.kind != kind or record.name != name:
        where = f"position {seq}" + ("" if branch is None else f" branch {branch}")
        raise NonDeterminismError(f"workflow {where} was recorded as {record.kind}:{record.name} but the code now asks for {kind}:{name}")


# What of a child agent run's Finish output a workflow sees (longstep.tasks.finish).
CHILD_FIELDS = ("run_id", "status", "output", "output_ref", "turns")


def child_outcome(name: str, resumed: dict[str, Any]) -> dict[str, Any]:
    """The recorded outcome of a ``ctx.agent`` call, from what its parked task token received:
    the child's Finish output, its failure (caught SendTaskFailure), a refusal or a timeout."""
    if resumed.get("timed_out"):
        return {"failed": {"type": "SubagentTimedOut", "message": f"the agent {name} did not finish in time"}}
    if resumed.get("refused"):
        return {"failed": {"type": "SubagentRefused", "message": str(resumed["refused"])}}
    if "Error" in resumed:
        return {"failed": {"type": str(resumed["Error"]), "message": str(resumed.get("Cause") or "")}}
    return {"ok": {k: resumed[k] for k in CHILD_FIELDS if k in resumed}}


def unwrap(name: str, outcome: Any) -> Any:
    """A recorded step outcome as the workflow sees it: the value, or its failure raised again."""
    if isinstance(outcome, dict) and "failed" in outcome:
        failed = outcome["failed"]
        raise StepFailedError(name, failed.get("type", "Error"), failed.get("message", ""))
    return outcome["ok"] if isinstance(outcome, dict) and "ok" in outcome else outcome


def run_pass(fn: Callable[[WorkflowContext, dict[str, Any]], Any], workflow_input: dict[str, Any], engine: Replay) -> dict[str, Any]:
    """Run the function once against the log: the directive the invocation returns.

    Raises:
        LongstepError: NonDeterminismError and the runtime's own errors (the task fails, the
            state machine retries or fails the execution: a code fix can resume the run).
        TransientError: from a step (retried by the state machine).
    """
    try:
        output = fn(WorkflowContext(engine), workflow_input)
    except Suspend as suspended:
        return suspended.directive
    except (LongstepError, TransientError):
        raise
    except Exception as exc:  # the workflow's own failure (an uncaught StepFailedError, say)
        return {"next": log.FAILED, "error": type(exc).__name__, "cause": str(exc)[:1000]}
    engine.finish_check()
    try:
        json.dumps(output)
    except (TypeError, ValueError) as exc:
        return {"next": log.FAILED, "error": "TypeError", "cause": f"the workflow's output is not JSON: {exc}"}
    return {"next": log.DONE, "output": output}
