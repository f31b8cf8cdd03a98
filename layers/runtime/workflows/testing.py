"""Run a workflow in memory, as the state machine would, for unit tests of workflow code.

:func:`run_in_memory` loops the same ``advance`` the Lambda runs over an in-memory checkpoint
store (``longstep.inmemory.InMemoryStore``) and performs each directive itself: a sleep moves a
fake clock, an approval takes its decision from ``decisions``, an event its payload from
``signals``. Pass the same ``store`` again to replay a recorded run (a changed workflow then
raises ``NonDeterminismError``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from longstep import clock
from longstep.inmemory import InMemoryStore
from longstep.runtime import Runtime
from longstep.settings import Settings
from longstep.steps import NoLock
from longstep.subagents import CHILD_FAILED_ERROR
from longstep.workflows import log
from longstep.workflows.children import child_id
from longstep.workflows.definition import Workflow
from longstep.workflows.tasks import advance


@dataclass
class MemoryRun:
    """How an in-memory run ended.

    Attributes:
        status: ``done`` or ``failed``.
        output: the workflow's output (done), or ``{"error", "cause"}`` (failed).
        invocations: how many times the function was invoked (each ``advance``).
        directives: every directive, in order.
        store: the store holding the run's log.
        seconds: the time the fake clock moved.
        executions: how many executions the run took (continue-as-new starts the next one).
    """

    status: str
    output: Any
    invocations: int
    directives: list[dict[str, Any]] = field(default_factory=list)
    store: InMemoryStore | None = None
    seconds: float = 0.0
    executions: int = 1


def run_in_memory(
    workflow: Workflow,
    workflow_input: dict[str, Any] | None = None,
    *,
    run_id: str = "workflow-test",
    name: str = "workflow",
    store: InMemoryStore | None = None,
    decisions: dict[str, dict[str, Any]] | None = None,
    signals: dict[str, Any] | None = None,
    start: float = 1_800_000_000.0,
    max_invocations: int = 1_000,
    passes_per_execution: int | None = None,
    agents: dict[str, Callable[[str, dict[str, Any]], str]] | None = None,
) -> MemoryRun:
    """Run ``workflow`` to its end in memory.

    Args:
        decisions: approval name -> decision (default ``{"decision": "approve"}``).
        signals: event name -> payload; an event missing here times out.
        start: the fake clock's first reading.
        passes_per_execution: hand the run to a new execution this often (continue-as-new).
        agents: agent name -> a stand-in for its child run: ``fn(goal, inputs)`` returns the final
            answer (raising: the child failed). A ``ctx.agent`` call to an agent missing here is refused.

    Raises:
        RuntimeError: the run did not end within ``max_invocations``.
    """
    store = store if store is not None else InMemoryStore()
    now = [start]
    rt = Runtime(settings=Settings.from_env({}, required=()), store=store, artifacts=None, lock=NoLock(), resolve_agent=_no_agents)  # type: ignore[arg-type]
    first: dict[str, Any] = {"run_id": run_id, "workflow": name, "input": dict(workflow_input or {})}
    if passes_per_execution is not None:
        first["passes_per_execution"] = passes_per_execution
    state = dict(first)
    directives: list[dict[str, Any]] = []
    executions = 1
    with clock.use_source(lambda: now[0]):
        for invocation in range(1, max_invocations + 1):
            directive = advance(rt, state, lambda _name: workflow)
            directives.append(directive)
            state["directive"] = directive
            kind = directive["next"]
            if kind in (log.DONE, log.FAILED):
                output = directive.get("output") if kind == log.DONE else {"error": directive["error"], "cause": directive["cause"]}
                return MemoryRun(kind, output, invocation, directives, store, now[0] - start, executions)
            if kind == log.CONTINUE_AS_NEW:  # a new execution: the state machine's state starts afresh
                executions += 1
                state = {**first, "generation": executions - 1}
            elif kind == log.WAIT:
                now[0] += directive["seconds"]
            elif kind == log.APPROVE:
                state["resumed"] = ({} if decisions is None else decisions).get(directive["name"], {"decision": "approve", "approver": "test"})
            elif kind == log.DELEGATE:
                state["resumed"] = _child(run_id, directive, agents or {})
            elif kind == log.SIGNAL:
                if directive["event"] in ({} if signals is None else signals):
                    state["resumed"] = {"payload": signals[directive["event"]]}  # type: ignore[index]
                else:
                    now[0] += directive["timeout_seconds"]
                    state["resumed"] = {"timed_out": True}
    raise RuntimeError(f"workflow run {run_id} did not end within {max_invocations} invocations")


def _child(run_id: str, directive: dict[str, Any], agents: dict[str, Callable[[str, dict[str, Any]], str]]) -> dict[str, Any]:
    """What a ``ctx.agent`` call's task token would receive from a stand-in child run."""
    fn = agents.get(directive["agent"])
    if fn is None:
        return {"refused": f"no agent named {directive['agent']!r} is deployed"}
    child = child_id(run_id, directive["seq"])
    try:
        answer = fn(directive["goal"], directive.get("inputs") or {})
    except Exception as exc:  # the child failed: SendTaskFailure, caught by the Delegate state
        return {"Error": CHILD_FAILED_ERROR, "Cause": f"run {child} failed: {exc}"}
    return {"run_id": child, "status": "SUCCEEDED", "output": answer, "turns": 1}


def _no_agents(name: str) -> Any:
    raise LookupError(f"no agents in an in-memory workflow run (asked for {name!r})")


def replay_recorded(workflow: Workflow, store: InMemoryStore, run_id: str = "workflow-test") -> Any:
    """Re-run ``workflow`` against a finished run's log without executing anything (as Temporal's
    replayer checks a code change against recorded histories).

    Returns:
        The output the code computes from the record (compare it with the recorded one).

    Raises:
        NonDeterminismError: the code asks for other calls, in another order, or fewer or more.
    """
    from longstep.codec import decode_json
    from longstep.claims import is_claim
    from longstep.store import step_record
    from longstep.workflows.replay import Replay, Suspend
    from longstep.workflows.context import WorkflowContext

    items = store.query_prefix(run_id, log.PREFIX)
    run = next(i for i in items if i["sk"] == log.RUN)
    records = [step_record(i) for i in items if i["sk"].startswith(log.STEP_PREFIX) and not is_claim(i)]
    last = max((r.result.get("wake_at", 0) for r in records if r.kind in (log.SLEEP, log.TIMER)), default=0.0)
    engine = Replay(store, NoLock(), run_id, records, now=lambda: last, replay_only=True)
    try:
        output = workflow.fn(WorkflowContext(engine), decode_json("input", run))
    except Suspend as suspended:  # pragma: no cover - a recorded, finished run never suspends
        raise RuntimeError(f"run {run_id} is not finished: it suspends at {suspended.directive}") from None
    engine.finish_check()
    return output
