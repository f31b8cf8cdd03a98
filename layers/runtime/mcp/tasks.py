"""Long-running MCP calls: the Tasks extension carried out by the state machine's condition loop.

A long-running tool's call is routed like a ``wait_for`` condition (``McpCall.route``): each
CheckCondition invocation is one step of the task's life, and WaitBackoff (a Wait state) waits
between polls, so nothing runs and nothing is billed but state transitions while the task works.

- The first check writes the call's task record (``keys.mcp_task_key``) before anything else,
  then sends ``tools/call`` with the call's idempotency key in ``_meta``, then records the task id.
  A crash between the two writes re-sends the call with the same key: a long-running tool is
  ``keyed`` (or ``read``), so the server answers with the same task, never a second one.
- Later checks poll ``tasks/get`` for the recorded task id; a crash while waiting resumes it.
- A stopped or interrupted run, or a wait past its ``timeout_seconds``, sends ``tasks/cancel``.
- The final result (offloaded to S3 when large) goes to CallTool in ``$.check``, which records it
  as the call's step like any tool result.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from longstep import clock, faults, keys, steering
from longstep.artifacts import offload_if_large
from longstep.errors import ToolInputError
from longstep.mcp import client
from longstep.contract.call import Check
from longstep.mcp.declare import CONDITION_PREFIX, IDEMPOTENCY_META_KEY, McpCall, mcp_call
from longstep.store import AlreadyRecordedError, Condition

_TERMINAL = ("completed", "failed", "cancelled")
MAX_POLL_SECONDS = 3600


def is_task_condition(condition: str | None) -> bool:
    """Whether a condition wait is a long-running MCP call's."""
    return bool(condition) and str(condition).startswith(CONDITION_PREFIX)


def has_tasks(agent: Any) -> bool:
    """Whether the agent has a long-running MCP tool (its CheckCondition function polls tasks)."""
    return bool(task_conditions(agent))


def task_conditions(agent: Any) -> tuple[str, ...]:
    """The condition names of the agent's long-running MCP tools."""
    return tuple(
        sorted(
            f"{CONDITION_PREFIX}{item.name}" for item in agent.tools.tools.values() if (call := mcp_call(item)) is not None and call.decl.long_running
        )
    )


def check(
    rt: Any,
    agent: Any,
    item: Any,
    use: Mapping[str, Any],
    run: Mapping[str, Any],
    waited: int,
    previous: Check,
    handover: Callable[[], bool],
) -> dict[str, Any]:
    """One CheckCondition step of a long-running MCP call: start the task, or poll it once.

    Returns the check the state machine routes on (``done``, ``next_wait``, ``handover``) and,
    when done, ``result`` for CallTool.
    """
    call = _call(agent, item.tool)
    key = keys.mcp_task_key(item.turn, item.call)
    record = rt.store.get(item.run_id, key)
    cancelled = steering.cancelled(run)
    if cancelled is not None:
        if record and record.get("task_id"):
            client.cancel_task(call.server, record["task_id"])
        return {"done": True, "met": False, "handover": False, "waited": waited, "cancelled": True}
    idempotency_key = keys.idempotency_key(item.run_id, item.turn, item.call)
    if record is None or not record.get("task_id"):
        if record is None:
            try:  # first, before the server hears of the call
                rt.store.put_once(item.run_id, key, {"tool": item.tool, "started_at": clock.now()})
            except AlreadyRecordedError:
                pass  # a concurrent duplicate of this check: the key makes its call the same call
        faults.reach(faults.BEFORE_TOOL, item.run_id, item.turn, item.call)
        reply = client.call_tool(call.server, call.tool_name, use.get("input") or {}, {IDEMPOTENCY_META_KEY: idempotency_key})
        faults.reach(faults.AFTER_EFFECT, item.run_id, item.turn, item.call)
        if "result" in reply:  # the server answered at once, without a task
            return _done(rt, waited, {"result": reply["result"]})
        task = reply["task"]
        rt.store.update(item.run_id, key, {"task_id": task["taskId"]}, when=Condition(exists=True))
        rt.events.emit(item.run_id, "mcp.task_started", turn=item.turn, call=item.call, tool=item.tool, task_id=task["taskId"])
    else:
        task = client.get_task(call.server, record["task_id"])
        faults.reach(faults.MCP_TASK_POLLED, item.run_id, item.turn, item.call)
    status = task.get("status")
    if status in _TERMINAL:
        return _done(rt, waited, task)
    if waited >= int(item.timeout_seconds or 0):
        client.cancel_task(call.server, task["taskId"])
        return {"done": True, "met": False, "handover": False, "waited": waited, "timed_out": True}
    if handover():
        return {"done": False, "met": False, "handover": True, "waited": waited}
    suggested = int(task.get("pollIntervalMs") or 0) // 1000
    interval = suggested or previous.next_wait * 2 or int(item.check_every or call.decl.poll_seconds)
    interval = max(1, min(interval, MAX_POLL_SECONDS, max(int(item.timeout_seconds or 0) - waited, 1)))
    return {"done": False, "met": False, "handover": False, "waited": waited, "next_wait": interval, "status": status}


def _done(rt: Any, waited: int, task: Mapping[str, Any]) -> dict[str, Any]:
    """A finished call's check: its result as the tool step will record it (offloaded when large)."""
    if task.get("status") == "cancelled":
        outcome = {"status": "error", "content": {"error": "the MCP server cancelled the task", "cancelled": True}}
    elif task.get("status") == "failed":
        error = task.get("error") or {}
        outcome = {"status": "error", "content": {"error": f"the task failed: {error.get('message') or error}"}}
    else:
        result = task.get("result") or {}
        outcome = {"status": "error" if result.get("isError") else "success", "content": client.content_of(result)}
    outcome = offload_if_large(outcome, rt.artifacts, rt.settings.offload_threshold_bytes)
    return {"done": True, "met": True, "handover": False, "waited": waited, "result": outcome}


def _call(agent: Any, tool: str) -> McpCall:
    item = agent.tools.tools.get(tool)
    call = mcp_call(item) if item is not None else None
    if call is None or not call.decl.long_running:
        raise ToolInputError(f"{tool}: not a long-running MCP tool of this agent")
    return call
