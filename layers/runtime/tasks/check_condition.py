"""CheckCondition: one check of a ``wait_for`` condition per backoff interval (a timer is a Wait
state and needs no task; an event is WaitForEvent's)."""

from __future__ import annotations

from typing import Any

from longstep import environment, keys
from longstep.errors import InvalidInputError
from longstep.inputs import parse_model
from longstep.contract.call import CallItem, Check
from longstep.contract.run import CHECKS, CHECKS_EXECUTION, RunRecord, condition_waited_field
from longstep.mcp import tasks as mcp_tasks
from longstep.resources import ENV_AGENT
from longstep.contract.steps import CheckOutput
from longstep.runtime import Runtime
from longstep.settings import ENV_CONDITION_CHECKS
from longstep.store import Condition
from longstep.tasks.common import load_run, tool_use

# Condition checks one execution may make (all its condition waits together) before a wait hands
# the run over to a fresh execution, so the history stays under 25,000 events (set by the stack
# from the events a check adds; unset or 0: no limit).
_ATTEMPTS = 5


def check_condition(rt: Runtime, event: Any) -> CheckOutput:
    """CheckCondition: one check of a ``wait_for`` condition, and the next backoff interval.

    The input is ``{"item": <the Map item>, "execution": <execution name>}``. Time is counted
    from the intervals the state machine waited (not the wall clock), so the timeout holds under
    the local clock too; each interval doubles, capped at an hour. When this execution has made
    its budget of checks (``LONGSTEP_CONDITION_CHECKS_PER_EXECUTION``), the answer is
    ``handover``: the state machine hands the run to a fresh execution, like continue-as-new, and
    the wait goes on there with what it had already waited.
    """
    execution = None
    if isinstance(event, dict) and isinstance(event.get("item"), dict):
        execution = event.get("execution")
        event = event["item"]
    item = parse_model(CallItem, event, "condition check input")
    if item.wait != "condition" or not item.condition:
        raise InvalidInputError("condition: a condition wait needs the condition's name")
    served = environment.environ().get(ENV_AGENT)  # the one agent whose tool code this function runs
    if served and not rt.resolve_agent(served).conditions and not mcp_tasks.has_tasks(rt.resolve_agent(served)):
        # An agent that declares no conditions: its CheckCondition role holds no grants (the
        # stack's loop_access), so the answer reads nothing.
        return {"done": True, "met": False, "handover": False, "waited": 0, "error": _unknown(item.condition, {})}
    run = load_run(rt, item.run_id)
    agent = rt.resolve_agent(run.agent)
    use = tool_use(rt, item)
    previous = item.check or Check()
    if item.check is None:  # the first check of this wait in this execution
        waited = run.condition_waited(item.turn, item.call)
    else:
        waited = previous.waited + previous.next_wait
    if mcp_tasks.is_task_condition(item.condition):  # a long-running MCP call: one step of its task

        def handover() -> bool:
            if not (execution and _spend_check(rt, item.run_id, str(execution))):
                return False
            rt.store.update(item.run_id, keys.RUN_RECORD, {condition_waited_field(item.turn, item.call): waited}, when=Condition(exists=True))
            return True

        return mcp_tasks.check(rt, agent, item, use, run, waited, previous, handover)
    check = agent.conditions.get(item.condition)
    if check is None:
        return {
            "done": True,
            "met": False,
            "handover": False,
            "waited": waited,
            "error": _unknown(item.condition, agent.conditions),
        }
    result = check(use["input"].get("args") or {})
    if result is not None:
        return {"done": True, "met": True, "handover": False, "result": result, "waited": waited}
    timeout = int(item.timeout_seconds or 0)
    if waited >= timeout:
        return {"done": True, "met": False, "handover": False, "timed_out": True, "waited": waited}
    if execution and _spend_check(rt, item.run_id, str(execution)):
        rt.store.update(item.run_id, keys.RUN_RECORD, {condition_waited_field(item.turn, item.call): waited}, when=Condition(exists=True))
        return {"done": False, "met": False, "handover": True, "waited": waited}
    interval = min(previous.next_wait * 2 or int(item.check_every or 30), 3600, max(timeout - waited, 1))
    return {"done": False, "met": False, "handover": False, "waited": waited, "next_wait": interval}


def _unknown(condition: str, known: dict[str, Any]) -> str:
    return f"condition: unknown condition {condition!r}; known: {', '.join(sorted(known)) or 'none'}"


def _spend_check(rt: Runtime, run_id: str, execution: str) -> bool:
    """Count one check against this execution's budget; True when the budget is spent."""
    budget = int(environment.environ().get(ENV_CONDITION_CHECKS) or 0)
    if budget <= 0:
        return False
    for _ in range(_ATTEMPTS):  # each attempt reacts to a concurrent check of another wait
        stored = rt.store.get(run_id, keys.RUN_RECORD)
        counted = None if stored is None else RunRecord.from_dict(stored).condition_checks(execution)
        if counted is not None:
            count = counted
            when = Condition(equal={CHECKS_EXECUTION: execution, CHECKS: count})
        else:  # the first check of this execution
            count = 0
            when = Condition(exists=True, not_equal={CHECKS_EXECUTION: execution})
        if count >= budget:
            return True
        if rt.store.update(run_id, keys.RUN_RECORD, {CHECKS_EXECUTION: execution, CHECKS: count + 1}, when=when) is not None:
            return False
    return True  # contention this high: hand over rather than risk the history limit
