"""Deciding approvals: the first decision wins, is recorded, then handed to the waiting task token."""

from __future__ import annotations

import json
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from longstep import keys
from longstep.errors import LongstepError
from longstep.store import CheckpointStore


class ApprovalNotFoundError(LongstepError):
    """No approval request with this id."""


class ApprovalAlreadyDecidedError(LongstepError):
    """The approval was decided before; the first decision stands."""

    def __init__(self, message: str, decision: dict[str, Any]) -> None:
        super().__init__(message)
        self.decision = decision


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
    for item in store.query_prefix(run_id, "approval#"):
        if item.get("status") == "pending":
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
    sk = keys.approval_key(turn, call)
    body = decision.model_dump(exclude_none=True)
    schema = keys.checkpoint_table()
    try:
        resp = store.client.update_item(
            TableName=store.table_name,
            Key={schema.partition_key: {"S": run_id}, schema.sort_key: {"S": sk}},
            UpdateExpression="SET #st = :decided, decision = :d, decided_at = :t",
            ConditionExpression="#st = :pending",
            ExpressionAttributeNames={"#st": "status"},
            ExpressionAttributeValues={
                ":decided": {"S": "decided"},
                ":pending": {"S": "pending"},
                ":d": {"S": json.dumps(body)},
                ":t": {"N": str(time.time())},
            },
            ReturnValues="ALL_NEW",
        )
    except store.client.exceptions.ConditionalCheckFailedException:
        existing = store.get(run_id, sk)
        if existing is None:
            raise ApprovalNotFoundError(f"no approval for run {run_id} turn {turn} call {call}") from None
        first = json.loads(existing.get("decision") or "{}")
        raise ApprovalAlreadyDecidedError(f"approval {run_id}/{turn}/{call} was already decided", first) from None
    token = resp["Attributes"]["task_token"]["S"]
    sfn.send_task_success(taskToken=token, output=json.dumps(body))
    return body
