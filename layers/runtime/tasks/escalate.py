"""Escalate: a step retries could not fix, parked for a human (retry, skip with a result, or
abort); the task parks on its token and holds no compute meanwhile."""

from __future__ import annotations

from typing import Any

from longstep import events, keys, runs_index
from longstep.errors import InvalidInputError
from longstep.humans import escalations, waiting
from longstep.humans.escalations import error_message
from longstep.humans.notifications import notify_escalation
from longstep.inputs import parse_model, task_token
from longstep.contract.call import CallItem
from longstep.contract.cursor import Cursor
from longstep.contract.steps import ParkedOutput
from longstep.runtime import Runtime
from longstep.tasks.common import hold_floor, tool_use


def escalate(rt: Runtime, event: Any) -> ParkedOutput:
    """Escalate: park a failed step for a human (retry, skip with a result, or abort).

    The input is the failed task's input with the caught error under ``error`` (Catch's
    ResultPath), the task token, and the failed state's name under ``step``. The record is keyed
    by turn and call: a model turn's call is ``MODEL_CALL``, a run step's (Init, Finish,
    ContinueAsNew) one of ``RUN_STEP_CALLS``; a call's wait shares its call's key.
    """
    token = task_token(event)
    failed = event.get("item")
    if not isinstance(failed, dict) or not isinstance(failed.get("error"), dict):
        raise InvalidInputError("escalation input: item.error: the caught error is required")
    error = failed["error"]
    reason = error_message(error.get("Cause"))
    step = event.get("step")  # the failed state's name (the state machine's Escalate payload)
    if step in escalations.RUN_STEP_CALLS:
        # A step of the run, not of a turn: Init has no cursor yet (turn 0), Finish and
        # ContinueAsNew are at the cursor's turn; each has an index of its own.
        cursor = parse_model(Cursor, {"run_id": failed.get("run_id"), "next_turn": failed.get("next_turn", 0)}, f"escalated {step}")
        turn, call, task, attrs = cursor.next_turn, escalations.RUN_STEP_CALLS[step], step, {"task": step}
    elif "call" in failed:
        item = parse_model(CallItem, failed, "escalated tool call")
        # A call's wait (RequestApproval, WaitForEvent) or the call itself.
        turn, call, task = item.turn, item.call, step if step in escalations.WAIT_STEPS else "CallTool"
        use = tool_use(rt, item)
        attrs = {"task": task, "tool": use["name"], "input": use["input"]}
    else:
        cursor = parse_model(Cursor, failed, "escalated model turn")
        turn, call, task, attrs = cursor.next_turn, escalations.MODEL_CALL, "ModelTurn", {"task": "ModelTurn"}
    attrs.update(error=str(error.get("Error", "Unknown")), reason=reason)
    # The run's expiry floor for the escalation record (the turn that led here planned for two
    # escalations: ``longstep.tasks.common.turn_horizon``).
    hold_floor(rt, failed["run_id"])
    status = waiting.park(rt.store, failed["run_id"], keys.escalation_key(turn, call), token, attrs)
    counts = runs_index.token_counts(rt.store.steps(failed["run_id"]))
    runs_index.on_status(rt.store, failed["run_id"], runs_index.ESCALATED, error=attrs["error"], counts=counts)
    shown = {k: v for k, v in attrs.items() if k != "input"}  # the arguments stay in the inbox (SNS messages are small)
    notify_escalation(rt.notifications(), {"run_id": failed["run_id"], "turn": turn, **shown})  # with the run's inbox link
    rt.events.emit(failed["run_id"], events.ESCALATION_RAISED, turn=turn, call=None if call < 0 else call, **shown)
    return {"run_id": failed["run_id"], "turn": turn, "task": task, "status": status}
