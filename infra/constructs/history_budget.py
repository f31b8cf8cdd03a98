"""The agent loop's history budget: how many turns and condition checks one execution may run.

A Standard execution keeps at most 25,000 history events. The counts below are the worst case
of the states the loop's definition (``constructs.agent_loop``) passes through, so the stack can
hand a run over to a fresh execution (ContinueAsNew) before its history could reach the limit.
"""

from __future__ import annotations

HISTORY_EVENT_LIMIT = 25_000
HISTORY_EVENT_MARGIN = 1_000  # Init, the hand-over, and slack
# Events kept for condition checks in each execution (all its condition waits together).
CONDITION_EVENT_RESERVE = 5_000


def history_events_per_check(retries_per_task: int = 2) -> int:
    """Worst-case history events of one condition check: the CheckCondition task (5, plus 3 per
    retry), ConditionChecked (2), ConditionSettled (2) and the WaitBackoff state (2)."""
    return 5 + 3 * retries_per_task + 2 + 2 + 2


def condition_checks_per_execution() -> int:
    """Checks an execution may make before a condition wait hands the run over."""
    return CONDITION_EVENT_RESERVE // history_events_per_check()


def history_events_per_turn(calls_per_turn: int, retries_per_task: int = 2) -> int:
    """Worst-case history events one turn adds, counting the states of the loop's definition.

    A Lambda task: entered, scheduled, started, succeeded, exited (5), plus scheduled, started,
    failed (3) per retry; a task-token task adds submitted. Route: 2. Map: 4, and per call an
    iteration's start and end (2), Dispatch (2), a waiting task (6) and CallTool (5).
    """
    retry = 3 * retries_per_task
    model = 5 + retry
    per_call = 2 + 2 + 6 + 5 + 2 * retry
    return model + 2 + 4 + calls_per_turn * per_call


def turns_per_execution(calls_per_turn: int, extra_per_turn: int = 0) -> int:
    """Turns an execution may run before its history could pass 25,000 events (the condition
    checks' reserve left out: they count against a budget of their own). ``extra_per_turn``: the
    events of states added before each turn (the fleet's rate limit: ``loop_fleet``)."""
    budget = HISTORY_EVENT_LIMIT - HISTORY_EVENT_MARGIN - CONDITION_EVENT_RESERVE
    return max(1, budget // (history_events_per_turn(calls_per_turn) + extra_per_turn))
