"""Approvals: a human decides on a tool call before it runs; the first decision wins."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from longstep import keys, waiting
from longstep.store import CheckpointStore

# The names callers know; the behaviour is that of every parked record.
ApprovalNotFoundError = waiting.WaitNotFoundError
ApprovalAlreadyDecidedError = waiting.AlreadyDecidedError


class Decision(BaseModel):
    """An approver's decision on one tool call.

    Attributes:
        decision: ``approve``, ``reject`` or ``edit``.
        reason: why (required to reject).
        input: the edited arguments (required to edit).
        approver: who decided.
    """

    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "reject", "edit"]
    reason: str | None = None
    input: dict[str, Any] | None = None
    approver: str = "unknown"

    @model_validator(mode="after")
    def _complete(self) -> "Decision":
        if self.decision == "reject" and not self.reason:
            raise ValueError("reason is required to reject")
        if self.decision == "edit" and self.input is None:
            raise ValueError("input is required to edit")
        return self


def pending_approvals(store: CheckpointStore, run_id: str) -> list[dict[str, Any]]:
    """The run's approval requests still waiting for a decision (without their task tokens)."""
    out = []
    for item in waiting.pending(store, run_id, "approval#"):
        _, turn, call = item["sk"].split("#")
        out.append(
            {
                "run_id": run_id,
                "turn": int(turn),
                "call": int(call),
                "tool": item["tool"],
                "input": json.loads(item["input"]),
                "requested_at": item["requested_at"],
            }
        )
    return out


def decide(store: CheckpointStore, sfn: Any, run_id: str, turn: int, call: int, decision: Decision) -> dict[str, Any]:
    """Record ``decision`` if the approval is still pending, then resume the waiting task.

    Raises:
        ApprovalNotFoundError: no such approval request.
        ApprovalAlreadyDecidedError: it was decided before (carries the first decision).
    """
    return waiting.resolve(store, sfn, run_id, keys.approval_key(turn, call), decision.model_dump(exclude_none=True))
