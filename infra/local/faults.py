"""Fault injection on the local stack: kill a Lambda invocation at a named step boundary.

``POINT@N`` crashes the first invocation that reaches POINT in turn N, in whichever run (a parent
or one of its subagent runs) gets there first; ``POINT@N:RUN`` only in the run RUN: a run id, or
the tail of a child run's id (``t0c1`` is ``<parent>-t0c1``, ``longstep.subagents.child_run_id``).
``random:K`` with a seed picks K distinct (point, turn) pairs reproducibly. A crash is what a killed process or a timeout
looks like to Step Functions (``Runtime.ExitError``): the state machine's Retry re-invokes the
task. The crashed invocation's step lock is expired at once, as if the time to its deadline had
passed (the local clock skips that wait; in AWS the lock-wait retrier outlasts it).
The zombie, lost-acknowledgement and clock-skew kinds are in :mod:`longstep_kit.local.fault_kinds`.
"""

from __future__ import annotations

import json
import random
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from longstep_kit.local import fault_kinds
from longstep_kit.local.dispatch import Crash
from longstep_kit.local.iam import acting_as
from longstep import faults, keys
from longstep.errors import ModelAccessError, ThrottledError
from longstep.steps import RecordLease

RESTART = "restart"
PERMANENT = "permanent"  # the model call fails with a permanent error (once)
BAD_TOOL_CALL = "bad_tool_call"  # the model's reply is replaced by a call to a tool that does not exist
VERIFIER_FAIL = "verifier_fail"  # the verifier rejects the final answer of that turn
POLICY_FAULTS = (PERMANENT, BAD_TOOL_CALL, VERIFIER_FAIL)


class FaultSpecError(ValueError):
    """A ``--fault`` or ``--faults`` value is malformed."""


@dataclass(frozen=True)
class Fault:
    """One planned crash: at ``point`` in turn ``turn`` (of the run ``run`` only, when given)."""

    point: str
    turn: int
    run: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"point": self.point, "turn": self.turn} | ({} if self.run is None else {"run": self.run})

    def hits(self, point: str, run_id: str, turn: int) -> bool:
        """Whether reaching ``point`` of ``turn`` in ``run_id`` is this fault's place."""
        if (point, turn) != (self.point, self.turn):
            return False
        return self.run is None or run_id == self.run or run_id.endswith(f"-{self.run}")


def fault_label(fired: dict[str, Any], run_id: str | None = None) -> str:
    """A fired fault as ``point@turn``, with `` in RUN`` when it fired in another run than ``run_id``."""
    where = fired.get("run")
    return f"{fired['point']}@{fired['turn']}" + (f" in {where}" if where and where != run_id else "")


def parse_fault(spec: str) -> Fault:
    """``POINT@N`` or ``POINT@N:RUN`` -> Fault."""
    point, sep, where = spec.partition("@")
    turn, _, run = where.partition(":")
    if sep and fault_kinds.kind_of(point) == fault_kinds.KILL:
        try:
            return Fault(fault_kinds.check_kill(spec, point.partition(".")[2], turn, run), int(turn), run or None)
        except ValueError as exc:
            raise FaultSpecError(str(exc)) from None
    if sep and fault_kinds.kind_of(point):
        try:
            return Fault(point, fault_kinds.check_kind(spec, point, turn, faults.POINTS), run or None)
        except ValueError as exc:
            raise FaultSpecError(str(exc)) from None
    if not sep or not turn.isdigit() or (":" in where and not run):
        raise FaultSpecError(f"--fault {spec!r}: expected POINT@TURN or POINT@TURN:RUN, e.g. after_effect@5 or after_model@1:t0c1")
    if point not in faults.POINTS + faults.DELEGATE_POINTS + faults.MCP_POINTS + POLICY_FAULTS:
        known = ", ".join(faults.POINTS + faults.DELEGATE_POINTS + faults.MCP_POINTS + POLICY_FAULTS + tuple(f"{k}.WHAT" for k in fault_kinds.KINDS))
        raise FaultSpecError(f"--fault {spec!r}: unknown fault {point!r}; known: {known}")
    return Fault(point, int(turn), run or None)


def random_faults(spec: str, seed: int, turns: int) -> list[Fault]:
    """``random:K`` -> K distinct faults over ``turns`` turns, the same for the same seed."""
    pairs = [Fault(point, turn) for turn in range(turns) for point in faults.POINTS]
    return sample_faults(spec, seed, pairs, f"for {turns} turns")


def sample_faults(spec: str, seed: int, pairs: list[Fault], where: str = "") -> list[Fault]:
    """``random:K`` -> K distinct faults of ``pairs`` (in a stable order), the same for the same seed."""
    kind, sep, count = spec.partition(":")
    if kind != "random" or not sep or not count.isdigit():
        raise FaultSpecError(f"--faults {spec!r}: expected random:K, e.g. random:12")
    k = int(count)
    if k > len(pairs):
        raise FaultSpecError(f"--faults {spec!r}: only {len(pairs)} distinct faults exist {where}".rstrip())
    order = faults.POINTS + faults.DELEGATE_POINTS + faults.MCP_POINTS
    return sorted(random.Random(seed).sample(pairs, k), key=lambda f: (f.turn, order.index(f.point)))


@dataclass
class FaultInjector:
    """Fires planned faults and records what fired.

    Args:
        plan: the faults to inject (each fires once).
        lock: builds the step lock whose abandoned record a crash leaves behind.
        restart_at: stop the execution when turn N's model call starts (handled by ``on_restart``).
        on_restart: called (in the invocation that reached turn N) to stop the execution.
        restart_point: where ``restart_at`` is counted (a workflow's: a step's ``before_tool``).
        dispatcher: the local stack's dispatcher (zombies and skews follow its invocations).
        lambda_client: builds the Lambda client a zombie's takeover is invoked with.
    """

    plan: list[Fault]
    lock: Callable[[], RecordLease]
    restart_at: int | None = None
    on_restart: Callable[[str], None] | None = None
    throttle_rate: float = 0.0
    seed: int = 0
    throttled: int = 0
    injected: list[dict[str, Any]] = field(default_factory=list)
    reached: Counter = field(default_factory=Counter)
    restart_point: str = faults.BEFORE_MODEL
    # Every (point, turn) reached: the fault points a run offers (``workflow_faults``).
    seen: set[tuple[str, int]] = field(default_factory=set)
    dispatcher: Any = None
    lambda_client: Callable[[], Any] | None = None
    _pending: set[Fault] = field(default_factory=set)
    _guard: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        skews = {f.point.partition(".")[2]: f.turn for f in self.plan if fault_kinds.kind_of(f.point) == fault_kinds.SKEW}
        self._pending = {f for f in self.plan if fault_kinds.kind_of(f.point) != fault_kinds.SKEW}
        self._current = fault_kinds.Current(skews)
        self._skewed: set[str] = set()
        self._zombies: set[int] = set()  # the invocations (by id) that resumed after a takeover
        lost = {(f.point.partition(".")[2], f.run) for f in self.plan if fault_kinds.kind_of(f.point) == fault_kinds.LOST_ACK}
        self._lost = fault_kinds.LostAcks(lost, self._lose) if lost else None
        self._writes: Counter = Counter()  # (kill.TASK, operation or None) -> that task's writes so far
        self._kills = any(fault_kinds.kind_of(f.point) == fault_kinds.KILL for f in self.plan)

    def install(self) -> None:
        faults.set_hook(self.reach)
        faults.set_interceptor(self.intercept)
        if self.dispatcher is not None:
            self.dispatcher.before_invoke.append(self._started)
            self.dispatcher.after_invoke.append(self._current.ended)
            self.dispatcher.after_invoke.append(self._count_reached)
        if self._lost is not None:
            self._lost.install()
        if self._kills and self.dispatcher is not None and self.dispatcher.isolation is not None:
            self.dispatcher.isolation.on_write = self._kill

    def uninstall(self) -> None:
        faults.set_hook(None)
        faults.set_interceptor(None)
        if self.dispatcher is not None:
            self.dispatcher.before_invoke.remove(self._started)
            self.dispatcher.after_invoke.remove(self._current.ended)
            self.dispatcher.after_invoke.remove(self._count_reached)
        if self._lost is not None:
            self._lost.uninstall()
        if self._kills and self.dispatcher is not None and self.dispatcher.isolation is not None:
            self.dispatcher.isolation.on_write = None

    def unfired(self) -> list[str]:
        """The planned faults that never fired (``POINT@N``), in plan order: a step the run never reached."""
        with self._guard:
            pending = set(self._pending)
        return [f"{f.point}@{f.turn}" + (f":{f.run}" if f.run else "") for f in self.plan if f in pending]

    def _started(self, invocation: Any) -> None:
        self._current.started(invocation)
        task = invocation.task
        if task in self._current.skews and task not in self._skewed:
            with self._guard:
                self._skewed.add(task)
                self.injected.append({"point": f"{fault_kinds.SKEW}.{task}", "turn": self._current.skews[task], "call": None, "run": None})

    def _lose(self, operation: str, target: str | None, index: int) -> bool:
        """Whether the response of the ``index``-th ``operation`` request (on ``target``) is to be lost (then taken)."""
        with self._guard:
            fault = next((f for f in self._pending if (f.point, f.turn, f.run) == (f"{fault_kinds.LOST_ACK}.{operation}", index, target)), None)
            if fault is None:
                return False
            self._pending.discard(fault)
            self.injected.append({"point": fault.point, "turn": index, "call": None, "run": target})
            return True

    def _count_reached(self, invocation: Any) -> None:
        """Count the points an invocation in a worker process passed (none of a killed one: it
        could not tell); in this process, :meth:`reach` counts them as they are passed."""
        with self._guard:
            for point, _run_id, turn, _call in getattr(invocation, "reached", ()):
                self.reached[point] += 1
                self.seen.add((point, turn))

    def _kill(self, worker: Any, operation: str, where: str) -> bool:
        """Whether a worker is to be killed now, after this write (on ``where``: a table, a URL).

        The run's writes by the worker's task are counted as each planned kill names them: all
        of them, one operation's, or one operation's on one target (as lost acknowledgements are).
        """
        if operation not in fault_kinds.LOST_ACK_OPERATIONS or worker.invocation is None:
            return False
        point = f"{fault_kinds.KILL}.{worker.invocation.task}"
        with self._guard:
            places = set()
            for key in {f.run for f in self.plan if f.point == point}:
                op, _, target = (key or "").partition(":")
                if (op and op != operation) or (target and target.lower() not in where.lower()):
                    continue
                places.add((key, self._writes[(point, key)]))
                self._writes[(point, key)] += 1
            fault = next((f for f in self.plan if f in self._pending and f.point == point and (f.run, f.turn) in places), None)
            if fault is None:
                return False
            self._pending.discard(fault)
            self.injected.append({"point": point, "turn": fault.turn, "call": None, "run": fault.run, "pid": worker.pid})
            return True

    def _take_over(self, point: str, run_id: str, turn: int, call: int | None, entry: dict[str, Any]) -> None:
        """A zombie's stall: its lease runs out, Step Functions' retry runs the task to the end."""
        invocation = self._current.invocation()
        if invocation is None or self.lambda_client is None:
            entry["takeover"] = "none (no dispatcher)"
            return
        if point in faults.POINTS:  # the stalled holder's lease is past its expiry
            self.lock().expire(keys.idempotency_key(run_id, turn, call))
        response = self.lambda_client().invoke(FunctionName=invocation.function, Payload=json.dumps(invocation.event))
        body = json.loads(response["Payload"].read() or b"null")
        entry["takeover"] = body.get("errorType", "error") if response.get("FunctionError") else "completed"
        with self._guard:
            self._zombies.add(id(invocation))  # from here on, what this invocation writes is late

    def _pop(self, point: str, run_id: str, turn: int) -> Fault | None:
        """The pending fault planned at this place (now taken), or None. Call with the guard held."""
        # A fault aimed at this run goes before one aimed at any run (sorted: the set has no order).
        aimed = sorted(self._pending, key=lambda f: (f.run is None, f.run or ""))
        fault = next((f for f in aimed if f.hits(point, run_id, turn)), None)
        if fault is not None:
            self._pending.discard(fault)
        return fault

    def _take(self, kind: str, run_id: str, turn: int) -> bool:
        with self._guard:
            if self._pop(kind, run_id, turn) is None:
                return False
            self.injected.append({"point": kind, "turn": turn, "call": None, "run": run_id})
            return True

    def intercept(self, what: str, run_id: str, turn: int, value: Any) -> Any:
        """Replace a model reply (bad_tool_call) or a verdict (verifier_fail) where planned.

        A zombie's model reply is marked ``zombie_write``: a record carrying it means the late
        write overwrote the winner's.
        """
        if what == faults.MODEL_REPLY and id(self._current.invocation()) in self._zombies:
            return {**value, "zombie_write": True}
        if what == faults.MODEL_REPLY and self._take(BAD_TOOL_CALL, run_id, turn):
            bad = {"toolUse": {"toolUseId": f"t{turn}bad", "name": "no_such_tool", "input": {}}}
            return {**value, "message": {"role": "assistant", "content": [bad]}, "stop_reason": "tool_use", "injected": BAD_TOOL_CALL}
        if what == faults.VERDICT and self._take(VERIFIER_FAIL, run_id, turn):
            return {"ok": False, "feedback": "injected verifier failure", "injected": VERIFIER_FAIL}
        return value

    def _throttle(self, point: str, run_id: str, turn: int, call: int | None) -> None:
        """Throttle a fraction of model and tool calls, reproducibly (seed, step, attempt)."""
        if self.throttle_rate <= 0 or point not in (faults.BEFORE_MODEL, faults.BEFORE_TOOL):
            return
        with self._guard:
            attempt = self.reached[(point, turn, call)]
            self.reached[(point, turn, call)] += 1
        draw = random.Random(f"{self.seed}:{run_id}:{point}:{turn}:{call}:{attempt}").random()
        if draw < self.throttle_rate:
            with self._guard:
                self.throttled += 1
            raise ThrottledError(f"injected throttling ({point}, turn {turn}, attempt {attempt + 1})")

    def reach(self, point: str, run_id: str, turn: int, call: int | None) -> None:
        with self._guard:
            # after_model is reached once per model call that answered (each one is billed);
            # after_effect once per tool call that ran: the true counts, crashes included.
            self.reached[point] += 1
            self.seen.add((point, turn))
            permanent = point == faults.BEFORE_MODEL and self._pop(PERMANENT, run_id, turn) is not None
            if permanent:
                self.injected.append({"point": PERMANENT, "turn": turn, "call": None, "run": run_id})
        if permanent:
            raise ModelAccessError(f"injected permanent error in turn {turn}")
        self._throttle(point, run_id, turn, call)
        with self._guard:
            if self.restart_at is not None and point == self.restart_point and turn == self.restart_at:
                self.restart_at = None
                fire = RESTART
            elif self._pop(point, run_id, turn) is not None:
                fire = point
            elif self._pop(f"{fault_kinds.ZOMBIE}.{point}", run_id, turn) is not None:
                fire = f"{fault_kinds.ZOMBIE}.{point}"
            else:
                return
            entry = {"point": fire, "turn": turn, "call": call, "run": run_id}
            self.injected.append(entry)
        # What follows is the operator's and the local stack's doing, not the function's: it runs
        # with no role bound (IAM enforcement would otherwise deny the function's role a
        # StopExecution, the invocation would fail, be retried, and the restart never happen).
        with acting_as(None):
            if fire == RESTART:
                # StopExecution does not kill a running Lambda: this invocation finishes its step
                # (and records it); the stopped execution goes no further, and a new one resumes.
                if self.on_restart:
                    self.on_restart(run_id)
                return
            if fire != point:  # a zombie: stalled while another attempt took over, now it resumes
                self._take_over(point, run_id, turn, call, entry)
                return
            # The crashed invocation never releases its lock; skip to its deadline so the retry can run.
            # (A delegated call's task takes no step lock: longstep.tasks.delegate_to_subagent.)
            if point in faults.POINTS:
                self.lock().expire(keys.idempotency_key(run_id, turn, call))
        raise Crash(f"{fire} in turn {turn}" + ("" if call is None else f" call {call}"))
