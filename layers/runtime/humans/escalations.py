"""Escalations: a step that cannot go on by itself waits for a human to retry, skip or abort it.

Reasons: a permanent error, retries exhausted, or an at-most-once tool whose outcome is unknown
(a crash hit after it may have acted). For that last one the human says whether it happened:
if it did, they give the result to record (``skip`` with ``result``); if not, ``retry`` with
``happened: false`` runs it once.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from longstep import keys, runs_index
from longstep.errors import BadRequestError
from longstep.humans import waiting
from longstep.store import CheckpointStore

MODEL_CALL = -1  # the "call" index of an escalated model turn
# The "call" index of an escalated step of the run rather than of a turn: Init (at turn 0), Finish
# and ContinueAsNew (at their cursor's turn). Each its own, so that a model turn escalating at the
# same turn is a first escalation of its own (``times`` counts one step's).
RUN_STEP_CALLS = {"Init": -2, "Finish": -3, "ContinueAsNew": -4}
# A tool call's waits: escalated at their call's key.
WAIT_STEPS = ("RequestApproval", "WaitForEvent")
# Steps that have no result a human could give: a skip is refused (retry or abort).
NO_SKIP_STEPS = (*RUN_STEP_CALLS, *WAIT_STEPS)


class Resolution(BaseModel):
    """A human's answer to an escalation.

    Attributes:
        action: ``retry`` the step, ``skip`` it with ``result`` as its outcome, or ``abort`` the run.
        result: the step's result when skipping (a tool's result, or a reply text for a model turn).
        happened: for an outcome-unknown tool: whether its effect happened.
        resolver: who answered.
    """

    model_config = ConfigDict(extra="forbid")

    action: Literal["retry", "skip", "abort"]
    result: Any = None
    happened: bool | None = None
    resolver: str = "unknown"

    @model_validator(mode="after")
    def _complete(self) -> "Resolution":
        if self.action == "skip" and self.result is None:
            raise ValueError("result is required to skip a step")
        return self


def pending_escalations(store: CheckpointStore, run_id: str) -> list[dict[str, Any]]:
    """The run's escalations waiting for an answer (without their task tokens)."""
    out = []
    for item in waiting.pending(store, run_id, "escalation#"):
        key = keys.parse(item["sk"])
        out.append(
            {
                "run_id": run_id,
                "turn": key.turn,
                "call": None if key.call < 0 else key.call,
                "step_call": key.call,  # the call of its key: negative for a model turn or a run step
                "task": item["task"],
                "tool": item.get("tool"),
                "error": item["error"],
                "reason": item["reason"],
                "times": int(item.get("times", 1)),
                "input": json.loads(item["input"]) if item.get("input") else None,
                "requested_at": item["requested_at"],
            }
        )
    return out


def resolve(store: CheckpointStore, sfn: Any, run_id: str, turn: int, call: int | None, resolution: Resolution) -> dict[str, Any]:
    """Answer an escalation and resume the run.

    ``call`` None answers the turn's escalation that is not a tool call's: the model turn's, or
    a run step's (Init, Finish, ContinueAsNew) when that one is pending.

    Raises:
        BadRequestError: a skip of a step that has no result to give (``NO_SKIP_STEPS``).
        waiting.WaitNotFoundError: no such escalation.
        waiting.AlreadyDecidedError: answered before.
    """
    sk = keys.escalation_key(turn, MODEL_CALL if call is None else call)
    if call is None:
        run_steps = [
            item["sk"] for item in waiting.pending(store, run_id, f"{keys.ESCALATION_PREFIX}{turn:06d}#") if keys.parse(item["sk"]).call < MODEL_CALL
        ]
        sk = run_steps[0] if run_steps else sk
    return resolve_at(store, sfn, run_id, sk, resolution)


def resolve_at(store: CheckpointStore, sfn: Any, run_id: str, sk: str, resolution: Resolution) -> dict[str, Any]:
    """Answer the escalation recorded at ``sk`` (``keys.escalation_key``) and resume the run.

    Raises:
        BadRequestError: a skip of a step that has no result to give (``NO_SKIP_STEPS``).
        waiting.WaitNotFoundError: no such escalation.
        waiting.AlreadyDecidedError: answered before.
    """
    if resolution.action == "skip":
        record = store.get(run_id, sk) or {}
        if record.get("task") in NO_SKIP_STEPS:
            raise BadRequestError("action", f"{record['task']} has no result to skip with: retry it or abort the run")
    answered = waiting.resolve(store, sfn, run_id, sk, resolution.model_dump(exclude_none=True))
    if resolution.action != "abort":  # the run goes on (an abort is recorded by ChildFailed)
        runs_index.on_status(store, run_id, runs_index.RUNNING)
    return answered


def error_message(cause: Any) -> str:
    """The message of a Lambda error cause (a JSON string with errorMessage), or the cause itself."""
    try:
        parsed = json.loads(cause)
    except (TypeError, ValueError):
        return str(cause or "")
    return str(parsed.get("errorMessage", cause)) if isinstance(parsed, dict) else str(cause)
