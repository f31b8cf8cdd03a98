"""Concurrent duplicates (Lambda is at-least-once): one model call, one effect, whoever wins."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from longstep.errors import StepInProgressError

from tests.functional.conftest import drive_to, handler, load_event, scan, script_provider

THREADS = 8


def _race(fn, event) -> list:
    barrier = threading.Barrier(THREADS)

    def one(_):
        barrier.wait()
        try:
            return fn(event)
        except StepInProgressError as exc:  # the loser: the state machine retries it
            return exc

    with ThreadPoolExecutor(THREADS) as pool:
        return list(pool.map(one, range(THREADS)))


def _settle(fn, event, outcomes: list) -> list:
    """Retry the losers, as the state machine's Retry would, once the winner has finished."""
    return [fn(event) if isinstance(o, StepInProgressError) else o for o in outcomes]


def test_one_model_call_for_eight_concurrent_invocations(aws):
    handler("init_run")(load_event("init_run"))
    model = handler("model_turn")
    outcomes = _settle(model, load_event("model_turn"), _race(model, load_event("model_turn")))
    assert script_provider().calls == 1
    assert sum(1 for o in outcomes if not o["replayed"]) == 1
    assert len({repr(o["calls"]) for o in outcomes}) == 1


def test_one_ticket_for_eight_concurrent_tool_calls(aws):
    drive_to(2)
    handler("model_turn")({"run_id": "func-run-1", "next_turn": 2})
    tool = handler("call_tool")
    event = {"run_id": "func-run-1", "turn": 2, "call": 0, "tool": "file_ticket"}
    outcomes = _settle(tool, event, _race(tool, event))
    assert sum(1 for o in outcomes if not o["replayed"]) == 1
    assert len([t for t in scan(aws["ddb"], "tickets") if t.get("run_id")]) == 1


def test_one_email_for_eight_concurrent_sends(aws):
    drive_to(5)
    handler("model_turn")({"run_id": "func-run-1", "next_turn": 5})
    tool = handler("call_tool")
    event = {"run_id": "func-run-1", "turn": 5, "call": 0, "tool": "send_email", "approval": True, "decision": {"decision": "approve"}}
    outcomes = _settle(tool, event, _race(tool, event))
    assert sum(1 for o in outcomes if not o["replayed"]) == 1
    assert len(scan(aws["ddb"], "outbox")) == 1
