"""A run as an MCP task (the Tasks extension, ``io.modelcontextprotocol/tasks``) for ``longstep mcp``.

A client that declares the extension gets a task for ``start_run``: its id is the run id, and
``tasks/get`` maps the run onto the task's states: ``working`` while it runs, ``input_required``
while an approval waits (each pending approval an ``elicitation/create`` request in
``inputRequests``, answered through ``tasks/update``), ``completed`` with the run's output,
``failed`` when it failed, ``cancelled`` when it was stopped or aborted; ``tasks/cancel`` stops it
(``StopExecution`` is the ops layer's, at the next step boundary).
https://modelcontextprotocol.github.io/ext-tasks/specification/2026-07-28/tasks.html
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from longstep_kit.client import Client
from longstep_kit.ops import runs

TASKS = "io.modelcontextprotocol/tasks"
POLL_MS = 5_000
_DECISION = {"type": "object", "properties": {"decision": {"type": "string", "enum": ["approve", "reject"]}}, "required": ["decision"]}


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def task_of(client: Client, run_id: str) -> dict[str, Any]:
    """The task view of a run (``tasks/get``'s answer, without ``resultType``)."""
    latest = runs.latest_execution(client.sfn, client.state_machine_arn, run_id)
    base = {
        "taskId": run_id,
        "createdAt": latest["startDate"].strftime("%Y-%m-%dT%H:%M:%SZ"),
        "lastUpdatedAt": _now(),
        "ttlMs": None,
        "pollIntervalMs": POLL_MS,
    }
    status = latest["status"]
    if status == "RUNNING":
        pending = client.approvals(run_id) if client.approvals_table else []
        if not pending:
            return {**base, "status": "working"}
        requests = {
            f"approval-{p['approval_id']}": {
                "method": "elicitation/create",
                "params": {"mode": "form", "message": f"Approve {p['tool']} with {json.dumps(p.get('input'))}?", "requestedSchema": _DECISION},
            }
            for p in pending
        }
        return {**base, "status": "input_required", "statusMessage": f"{len(pending)} approval(s) waiting", "inputRequests": requests}
    described = client.sfn.describe_execution(executionArn=latest["executionArn"])
    output = json.loads(described.get("output") or "{}")
    if status == "SUCCEEDED" and output.get("status") != "STOPPED":
        text = output.get("output")
        return {**base, "status": "completed", "result": {"content": [{"type": "text", "text": str(text)}], "isError": False}}
    if status == "FAILED":
        return {**base, "status": "failed", "error": {"code": -32603, "message": f"{described.get('error')}: {described.get('cause') or ''}"[:1000]}}
    return {**base, "status": "cancelled", "statusMessage": f"the run ended {status.lower()}"}


def extension(client: Client) -> Any:
    """The server side of the Tasks extension over ``client``'s runs."""
    from mcp.server.mcpserver import Extension, MethodBinding
    from mcp_types import RequestParams

    class TaskParams(RequestParams):
        taskId: str

    class UpdateParams(TaskParams):
        inputResponses: dict[str, Any] = {}

    class RunTasks(Extension):
        identifier = TASKS

        def methods(self) -> Any:
            async def get(ctx: Any, params: TaskParams) -> dict[str, Any]:
                return {"resultType": "complete", **task_of(client, params.taskId)}

            async def update(ctx: Any, params: UpdateParams) -> dict[str, Any]:
                for key, response in params.inputResponses.items():
                    if not key.startswith("approval-") or not isinstance(response, dict):
                        continue  # not a key this server issued: ignored, as the extension says
                    accepted = response.get("action") == "accept"
                    decision = (response.get("content") or {}).get("decision") if accepted else "reject"
                    client.decide(
                        key[len("approval-") :], decision if decision in ("approve", "reject") else "reject", None if accepted else "declined"
                    )
                return {"resultType": "complete"}

            async def cancel(ctx: Any, params: TaskParams) -> dict[str, Any]:
                client.stop(params.taskId, "cancelled through MCP")
                return {"resultType": "complete"}

            return [
                MethodBinding("tasks/get", TaskParams, get),
                MethodBinding("tasks/update", UpdateParams, update),
                MethodBinding("tasks/cancel", TaskParams, cancel),
            ]

        async def intercept_tool_call(self, params: Any, ctx: Any, call_next: Any) -> Any:
            declared = ((ctx.meta or {}).get("io.modelcontextprotocol/clientCapabilities") or {}).get("extensions") or {}
            if params.name != "start_run" or TASKS not in declared:
                return await call_next(ctx)
            started = await call_next(ctx)  # starts the run
            if getattr(started, "is_error", False):  # refused (bad input, a running run id): as without tasks
                return started
            return {"resultType": "task", **task_of(client, str((params.arguments or {})["run_id"]))}

    return RunTasks()
