"""A signal for a wait that already timed out (its task token is dead) is not lost: Step Functions
refuses the token, and the signal is kept buffered for the next wait on that event."""

from __future__ import annotations

from longstep import keys
from longstep.humans import signals
from longstep.store import CheckpointStore
from longstep_kit.local.runner import RunOptions, run_scenario
from longstep_kit.local.scenario import Scenario

RUN = "late-signal"


def _scenario(triage) -> Scenario:
    def wait(timeout: int) -> dict:
        return {"name": "wait_for", "input": {"event": "rollback_alarm", "timeout_seconds": timeout}}

    return Scenario.model_validate(
        {
            "name": "late_signal",
            "input": {"goal": "Watch for a rollback alarm, twice.", "agent": "triage", "max_turns": 4},
            "world": triage.world,
            "turns": {
                "0": {"text": "Watching for an alarm for a minute.", "tool_calls": [wait(60)]},
                "1": {"text": "Watching again.", "tool_calls": [wait(86_400)]},
                "2": {"text": "Summary: the alarm fired once."},
            },
        }
    )


def test_a_signal_after_the_wait_timed_out_is_kept_for_the_next_wait(stack, triage):
    stack.reset_data()
    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
    outcomes: list[str] = []

    def signal_once_the_first_wait_timed_out(inv) -> None:
        # Turn 0's CallTool runs after its wait timed out: the waiter record still names the dead token.
        if inv.task.startswith("call_tool") and not outcomes and (inv.event.get("signal") or {}).get("timed_out"):
            assert store.get(RUN, keys.signal_key("rollback_alarm"))["status"] == signals.WAITING
            outcomes.append(signals.deliver(store, stack.client("stepfunctions"), RUN, "rollback_alarm", {"severity": "high"}))

    stack.dispatcher.after_invoke.append(signal_once_the_first_wait_timed_out)
    try:
        report = run_scenario(stack, _scenario(triage), RunOptions(run_id=RUN, execution_name="late-signal-1"))
    finally:
        stack.dispatcher.after_invoke.remove(signal_once_the_first_wait_timed_out)
    assert outcomes == [signals.BUFFERED]
    assert report["status"] == "SUCCEEDED"
    first = store.get_step(RUN, keys.tool_step_key(0, 0)).result["content"]
    second = store.get_step(RUN, keys.tool_step_key(1, 0)).result["content"]
    assert first == {"waited": "event", "event": "rollback_alarm", "timed_out": True}
    assert second == {"waited": "event", "event": "rollback_alarm", "payload": {"severity": "high"}}
