"""What several tasks read: the run record, the tool use a call item names, the task token."""

from __future__ import annotations

import json
from typing import Any

from longstep import keys
from longstep.errors import InvalidInputError, NonDeterminismError
from longstep.inputs import ToolCallItem
from longstep.messages import tool_uses
from longstep.runtime import Runtime


def load_run(rt: Runtime, run_id: str) -> dict[str, Any]:
    """The run record, with its JSON fields decoded.

    Raises:
        InvalidInputError: no run with this id.
    """
    record = rt.store.get(run_id, keys.RUN_RECORD)
    if record is None:
        raise InvalidInputError(f"run_id: no run named {run_id!r}")
    record["model"] = json.loads(record["model"])
    record["memories"] = json.loads(record["memories"]) if record.get("memories") else []
    return record


def tool_use(rt: Runtime, item: ToolCallItem) -> dict[str, Any]:
    """The tool use ``item`` names, read from its turn's recorded model reply.

    Raises:
        InvalidInputError: the turn has no recorded reply, or fewer calls.
        NonDeterminismError: the recorded call is of another tool.
    """
    reply = rt.store.get_step(item.run_id, keys.model_step_key(item.turn))
    if reply is None:
        raise InvalidInputError(f"turn: turn {item.turn} of run {item.run_id} has no recorded model reply")
    uses = tool_uses(reply.result["message"])
    if item.call >= len(uses):
        raise InvalidInputError(f"call: turn {item.turn} has {len(uses)} tool calls, not {item.call + 1}")
    use = uses[item.call]
    if use["name"] != item.tool:
        raise NonDeterminismError(f"call {item.call} of turn {item.turn} is {use['name']}, not {item.tool}")
    return use


def task_token(event: Any) -> str:
    """The task token of a ``waitForTaskToken`` task's input.

    Raises:
        InvalidInputError: the input carries no token.
    """
    if not isinstance(event, dict) or not isinstance(event.get("token"), str) or not event["token"]:
        raise InvalidInputError("token: a task token string is required")
    return event["token"]
