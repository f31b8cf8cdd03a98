"""The context a workflow function is written against.

Every call on the context takes the next position in the run's step log. On the first pass the
call does its work and records the outcome; on every later pass (the function re-runs from the
top at each invocation) it returns the recorded outcome instead. That is why the rules in
docs/workflows.md hold: the function may branch only on what the context returns, and must ask
for the same calls in the same order, or replay raises ``NonDeterminismError``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

from longstep.tools.registry import Effect

MAX_SLEEP_SECONDS = 364 * 86_400  # a Standard execution lasts at most a year (longstep.workflows.replay)


@dataclass(frozen=True)
class StepInfo:
    """What a step function is told about the step it runs.

    Attributes:
        run_id: the workflow run.
        seq: the step's position in the run's log.
        branch: its branch of a parallel call, or None.
        idempotency_key: unique to this step of this run and the same on every re-run: a
            ``keyed`` step hands it to the system it writes to.
        name: the step's name.
    """

    run_id: str
    seq: int
    branch: int | None
    idempotency_key: str
    name: str


StepFn = Callable[[Any, StepInfo], Any]


@dataclass(frozen=True)
class Call:
    """One step to run: ``fn(args, info)`` under an effect class (docs/design.md §3).

    Attributes:
        fn: the step's function; its return value (JSON) is recorded.
        args: its arguments (JSON), passed as they are.
        effect: ``read``, ``keyed``, ``check_then_act`` or ``at_most_once``.
        name: the name recorded and checked on replay (default: the function's name).
        check: for ``check_then_act``: ``check(args, info)`` returns the result when the work is
            already done, else None.
    """

    fn: StepFn
    args: Any = None
    effect: Effect | str = Effect.READ
    name: str | None = None
    check: StepFn | None = None

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise TypeError(f"step fn: expected a function, got {type(self.fn).__name__}")
        try:
            object.__setattr__(self, "effect", Effect(self.effect))
        except ValueError:
            known = ", ".join(e.value for e in Effect)
            raise ValueError(f"effect: {self.effect!r} is not one of {known}") from None
        if self.effect is Effect.CHECK_THEN_ACT and self.check is None:
            raise ValueError(f"check: step {self.step_name!r} is check_then_act and needs a check function")
        if self.name is not None and not (isinstance(self.name, str) and self.name):
            raise ValueError("name: a step name must be a non-empty string")

    @property
    def step_name(self) -> str:
        """The name recorded for the step."""
        return self.name or getattr(self.fn, "__name__", "step")


class StepFailedError(Exception):
    """A step's function raised. The failure is recorded like a result, so every replay raises
    it again at the same place: a workflow may catch it and take another path.

    Attributes:
        step: the step's name.
        error_type: the class name of what the function raised.
        message: its message.
    """

    def __init__(self, step: str, error_type: str, message: str) -> None:
        super().__init__(f"step {step!r} failed: {error_type}: {message}")
        self.step = step
        self.error_type = error_type
        self.message = message


class Engine(Protocol):
    """What the context asks of the engine that replays the workflow (``longstep.workflows.replay.Replay``)."""

    run_id: str

    def step(self, call: Call) -> Any: ...
    def parallel(self, calls: list[Call]) -> list[Any]: ...
    def sleep(self, seconds: int, kind: str) -> None: ...
    def approval(self, name: str, details: dict[str, Any], timeout_seconds: int | None) -> dict[str, Any]: ...
    def event(self, name: str, match: dict[str, Any], timeout_seconds: int | None) -> Any: ...
    def agent(self, name: str, goal: str, inputs: dict[str, Any]) -> Any: ...
    def now(self) -> float: ...
    def random(self) -> float: ...
    def uuid(self) -> str: ...


class WorkflowContext:
    """What a workflow function may do. Build nothing yourself: the runtime passes it in."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @property
    def run_id(self) -> str:
        """The run's id (stable across invocations and executions)."""
        return self._engine.run_id

    def step(self, fn: StepFn, args: Any = None, *, effect: Effect | str = Effect.READ, name: str | None = None, check: StepFn | None = None) -> Any:
        """Run ``fn(args, info)`` once for this run and return its recorded result.

        Raises:
            StepFailedError: the function raised (recorded: replays raise it again).
        """
        return self._engine.step(Call(fn, args, effect, name, check))

    def parallel(self, calls: Sequence[Call]) -> list[Any]:
        """Run several steps concurrently; their results in the order given.

        Raises:
            StepFailedError: one of them raised (the first, in order; the others still ran).
        """
        calls = list(calls)
        if not calls or not all(isinstance(c, Call) for c in calls):
            raise TypeError("parallel: expected a non-empty list of longstep.workflows.Call")
        return self._engine.parallel(calls)

    def approval(self, name: str, details: dict[str, Any] | None = None, *, timeout_seconds: int | None = None) -> dict[str, Any]:
        """Wait, holding no compute, for a human's decision (the approvals API, CLI or console).

        Returns:
            The decision: ``{"decision": "approve" | "reject" | "edit" | "timeout", "reason"?,
            "input"?, "approver"?}``.
        """
        return self._engine.approval(_name("approval", name), dict(details or {}), timeout_seconds)

    def agent(self, name: str, goal: str, **inputs: Any) -> dict[str, Any]:
        """Hand a task to the agent ``name``: a child agent run with its own checkpoints.

        The workflow holds no compute while the child runs (its execution parks on a task token
        that the child's end answers). The child's run id is ``<run_id>-s<position>``: a retried or
        crashed pass re-attaches to the same child and never starts a second one.

        Args:
            name: a deployed agent (cdk.json ``longstep.agents``).
            goal: what the agent should do.
            **inputs: data it needs (JSON), shown to it with the goal.

        Returns:
            The child's outcome: ``{"run_id", "status", "output", "turns", "output_ref"?}``
            (``output`` is its final answer).

        Raises:
            StepFailedError: the child failed, was aborted, timed out or could not start
                (recorded: replays raise it again).
        """
        if not isinstance(goal, str) or not goal.strip():
            raise ValueError("goal: a non-empty string is required")
        return self._engine.agent(_name("agent", name), goal, dict(inputs))

    def wait_for(
        self, event: str | None = None, *, timer: float | None = None, match: dict[str, Any] | None = None, timeout_seconds: int | None = None
    ) -> Any:
        """Wait, holding no compute, for a signal ``event`` (sent to this run) or for ``timer`` seconds.

        Returns:
            The signal's payload (None when the wait timed out); None for a timer.
        """
        if (event is None) == (timer is None):
            raise ValueError("wait_for: give exactly one of event or timer")
        if timer is not None:
            self._engine.sleep(_seconds(timer), kind="timer")
            return None
        return self._engine.event(_name("event", event), dict(match or {}), timeout_seconds)

    def sleep(self, seconds: float = 0, *, minutes: float = 0, hours: float = 0, days: float = 0) -> None:
        """Suspend the run for this long: a Wait state, no Lambda runs meanwhile."""
        self._engine.sleep(_seconds(seconds + 60 * minutes + 3600 * hours + 86_400 * days), kind="sleep")

    def now(self) -> float:
        """The time (epoch seconds) when this call was first made: the same on every replay."""
        return self._engine.now()

    def random(self) -> float:
        """A random float in [0, 1), drawn once and replayed."""
        return self._engine.random()

    def uuid(self) -> str:
        """A random UUID, made once and replayed."""
        return self._engine.uuid()


def _name(field: str, value: Any) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= 128:
        raise ValueError(f"{field}: a name of 1-128 characters is required, got {value!r}")
    return value


def _seconds(value: Any) -> int:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"seconds: expected a number, got {value!r}") from None
    if not 0 <= seconds <= MAX_SLEEP_SECONDS:
        raise ValueError(f"seconds: must be between 0 and {MAX_SLEEP_SECONDS}, got {value!r}")
    return int(round(seconds))
