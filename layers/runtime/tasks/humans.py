"""The tasks that wait for a human: RequestApproval (a decision on a tool call) and Escalate (a
step retries could not fix). Both park on a task token and hold no compute meanwhile."""

from __future__ import annotations

import json
from typing import Any

from longstep import events, keys, runs_index
from longstep.claims import is_claim
from longstep.errors import InvalidInputError
from longstep.humans import escalations, requests, waiting
from longstep.humans.notifications import notify_escalation, publisher
from longstep.inputs import Cursor, ToolCallItem, parse_model
from longstep.runtime import Runtime
from longstep.tasks.common import hold_floor, load_run, task_token, tool_use


def request_approval(rt: Runtime, event: Any) -> dict[str, Any]:
    """RequestApproval: record a pending approval holding the task token (never returned or logged).

    A re-invocation after the decision was recorded hands the recorded decision to the new token,
    so a retry cannot leave the run waiting for a decision that was already made.
    """
    token = task_token(event)
    item = parse_model(ToolCallItem, event.get("item"), "approval item")
    use = tool_use(rt, item)
    run = load_run(rt, item.run_id)
    settings = rt.settings.approvals
    outcome = requests.request(
        rt.approvals(),
        rt.store,
        rt.step_functions(),
        run_id=item.run_id,
        turn=item.turn,
        call=item.call,
        tool=use["name"],
        tool_input=use["input"],
        agent=run["agent"],
        token=token,
        timeout_seconds=settings.timeout_seconds,
        notify=publisher(rt.notifications(), settings),  # the topic and the webhook, with the decision page's link
        unanswered=lambda: _unanswered(rt, item),
    )
    if outcome.get("status") == "pending":
        # The request's id, never its link: a decision link is a bearer credential, minted for
        # whoever may decide (``longstep approvals``, the inbox), not stored in the stream.
        rt.events.emit(
            item.run_id, events.APPROVAL_REQUESTED, turn=item.turn, call=item.call, tool=use["name"], approval_id=outcome.get("approval_id")
        )
    return {"run_id": item.run_id, "turn": item.turn, "call": item.call, **outcome}


def _unanswered(rt: Runtime, item: ToolCallItem) -> bool:
    """The call has no recorded result (at most a claim of an attempt under way)."""
    found = rt.store.get(item.run_id, keys.tool_step_key(item.turn, item.call))
    return found is None or is_claim(found)


def escalate(rt: Runtime, event: Any) -> dict[str, Any]:
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
        item = parse_model(ToolCallItem, failed, "escalated tool call")
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


def error_message(cause: Any) -> str:
    """The message of a Lambda error cause (a JSON string with errorMessage), or the cause itself."""
    try:
        parsed = json.loads(cause)
    except (TypeError, ValueError):
        return str(cause or "")
    return str(parsed.get("errorMessage", cause)) if isinstance(parsed, dict) else str(cause)
