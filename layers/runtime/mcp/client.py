"""One MCP request at a time over streamable HTTP, through the ``mcp`` SDK's client session.

Each function opens a session, makes its request and closes it: a Lambda invocation makes one
call (or one poll), and nothing of a session survives between polls anyway. The Tasks extension
(``io.modelcontextprotocol/tasks``, not in the SDK) is implemented here from its specification on
top of the SDK's session: the client advertises it per request, claims the ``resultType: "task"``
shape of ``tools/call``, and sends ``tasks/get`` and ``tasks/cancel`` itself
(https://modelcontextprotocol.github.io/ext-tasks/specification/2026-07-28/tasks.html).

Errors are sorted into Longstep's failure classes: a transport failure, a timeout or a 5xx is
transient (the state machine retries); a refused credential (401, 403) is permanent; a protocol
error caused by the call itself (unknown tool, invalid params) is the model's to correct.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Literal, Mapping

from longstep.errors import (
    McpAuthError,
    McpProtocolError,
    PermanentError,
    ServiceUnavailableError,
    ThrottledError,
    ToolArgumentsError,
    UnknownToolError,
)

# ``server`` below is a ``longstep.mcp.declare.McpServer`` (not imported: the declarations use this module).
McpServer = Any

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
# JSON-RPC codes a wrong call earns (https://www.jsonrpc.org/specification#error_object).
_METHOD_NOT_FOUND, _INVALID_PARAMS = -32601, -32602


def _quiet_transport_logs() -> None:
    # The HTTP client logs every request line at INFO; a URL can carry a credential (a key in its
    # query string), and no MCP traffic belongs in the function's logs.
    for name in ("httpx2", "httpx", "mcp", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)


def _types() -> Any:
    """The SDK's models this module needs (imported on first use: a cold start without MCP pays nothing)."""
    import mcp_types
    from mcp.client.extension import ClientExtension, ResultClaim
    from pydantic import ConfigDict

    class TaskParams(mcp_types.RequestParams):
        taskId: str

    class CreateTaskResult(mcp_types.Result):
        model_config = ConfigDict(extra="allow")
        result_type: Literal["task"] = "task"
        task_id: str
        status: str

    class GetTaskRequest(mcp_types.Request[TaskParams, Literal["tasks/get"]]):
        method: Literal["tasks/get"] = "tasks/get"
        name_param = "taskId"  # the Tasks extension requires the Mcp-Name header on tasks/*

    class UpdateParams(TaskParams):
        inputResponses: dict[str, Any]

    class UpdateTaskRequest(mcp_types.Request[UpdateParams, Literal["tasks/update"]]):
        method: Literal["tasks/update"] = "tasks/update"
        name_param = "taskId"

    class CancelTaskRequest(mcp_types.Request[TaskParams, Literal["tasks/cancel"]]):
        method: Literal["tasks/cancel"] = "tasks/cancel"
        name_param = "taskId"

    class AnyResult(mcp_types.Result):
        model_config = ConfigDict(extra="allow")

    async def _unresolved(result: Any, ctx: Any) -> Any:  # we poll durably, never inside the call
        raise McpProtocolError("a task result reached the SDK's resolver")

    class Tasks(ClientExtension):
        identifier = TASKS_EXTENSION

        def claims(self) -> Any:
            return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=_unresolved)]

    return TaskParams, CreateTaskResult, GetTaskRequest, CancelTaskRequest, AnyResult, Tasks, UpdateParams, UpdateTaskRequest


_TYPES: Any = None


def _sdk() -> Any:
    global _TYPES
    if _TYPES is None:
        _quiet_transport_logs()
        _TYPES = _types()
    return _TYPES


async def _session(server: McpServer, body: Any, statuses: list[int]) -> Any:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def note_status(response: Any) -> None:
        # The SDK turns an HTTP error into a generic JSON-RPC error: keep the status, which says
        # whether the credential was refused (401, 403) or the server failed (5xx).
        if response.status_code >= 400:
            statuses.append(response.status_code)

    tasks = _sdk()[5]
    timeout = httpx2.Timeout(server.timeout_seconds)
    async with httpx2.AsyncClient(headers=server.request_headers(), timeout=timeout, event_hooks={"response": [note_status]}) as http:
        transport = streamable_http_client(server.resolved_url(), http_client=http)
        async with Client(transport, extensions=[tasks()], cache=None, read_timeout_seconds=server.timeout_seconds) as client:
            return await body(client)


def _run(server: McpServer, what: str, body: Any) -> Any:
    statuses: list[int] = []
    try:
        return asyncio.run(_session(server, body, statuses))
    except Exception as exc:  # noqa: BLE001 - sorted into the failure classes below
        raise _classify(server, what, exc, statuses[-1] if statuses else None) from None


def _classify(server: McpServer, what: str, exc: BaseException, status: int | None = None) -> BaseException:
    """The Longstep error for a failed MCP request (the message names no header or credential)."""
    import httpx2
    from mcp import MCPError

    if isinstance(exc, BaseExceptionGroup):  # anyio task groups wrap what the transport raised
        inner = exc.exceptions[0] if exc.exceptions else exc
        if inner is not exc:
            return _classify(server, what, inner, status)
    where = f"MCP server {server.name!r} ({what})"
    if isinstance(exc, (PermanentError, ToolArgumentsError, UnknownToolError)):
        return exc
    if status is None and isinstance(exc, httpx2.HTTPStatusError):
        status = exc.response.status_code
    has_code = isinstance(exc, MCPError) and exc.code in (_METHOD_NOT_FOUND, _INVALID_PARAMS) and status not in (404, None)
    if status is not None and not has_code:
        if status in (401, 403):
            return McpAuthError(f"{where}: the server refused the credential (HTTP {status})")
        if status == 429:
            return ThrottledError(f"{where}: HTTP 429, throttled")
        if status >= 500:
            return ServiceUnavailableError(f"{where}: HTTP {status}")
        return McpProtocolError(f"{where}: HTTP {status} (is the server's URL right?)" if status == 404 else f"{where}: HTTP {status}")
    if isinstance(exc, (httpx2.TransportError, TimeoutError, ConnectionError, OSError)):
        return ServiceUnavailableError(f"{where}: {type(exc).__name__}: the server could not be reached")
    if isinstance(exc, MCPError):
        if exc.code == _METHOD_NOT_FOUND:
            return UnknownToolError(f"{where}: {exc.message}")
        if exc.code == _INVALID_PARAMS:
            return ToolArgumentsError(f"{where}: {exc.message}")
        if exc.code in (-32000, -32603):  # server-side failures: may pass
            return ServiceUnavailableError(f"{where}: {exc.message}")
        return McpProtocolError(f"{where}: error {exc.code}: {exc.message}")
    return McpProtocolError(f"{where}: {type(exc).__name__}: {exc}")


def _dump(model: Any) -> dict[str, Any]:
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def list_tools(server: McpServer) -> list[dict[str, Any]]:
    """The server's tools (``name``, ``description``, ``inputSchema``, ``annotations``), every page."""

    async def body(client: Any) -> list[dict[str, Any]]:
        tools, cursor = [], None
        while True:
            page = await client.list_tools(cursor=cursor) if cursor else await client.list_tools()
            tools += [_dump(t) for t in page.tools]
            cursor = page.next_cursor
            if not cursor:
                return tools

    return _run(server, "tools/list", body)


def call_tool(server: McpServer, name: str, arguments: Mapping[str, Any], meta: Mapping[str, Any]) -> dict[str, Any]:
    """``tools/call``: ``{"result": <CallToolResult>}``, or ``{"task": <Task>}`` when the server made a task."""
    create_task = _sdk()[1]

    async def body(client: Any) -> dict[str, Any]:
        result = await client.session.call_tool(name, dict(arguments), meta=dict(meta) or None, allow_claimed=True)
        if isinstance(result, create_task):
            return {"task": _dump(result)}
        return {"result": _dump(result)}

    return _run(server, f"tools/call {name}", body)


def get_task(server: McpServer, task_id: str) -> dict[str, Any]:
    """``tasks/get``: the task's state (``status``, and ``result`` or ``error`` once it ended)."""
    params, _, get_request, _, any_result, *_ = _sdk()

    async def body(client: Any) -> dict[str, Any]:
        return _dump(await client.session.send_request(get_request(params=params(taskId=task_id)), any_result))

    return _run(server, "tasks/get", body)


def cancel_task(server: McpServer, task_id: str) -> None:
    """``tasks/cancel``: ask the server to cancel the task (it may have ended already)."""
    params, _, _, cancel_request, any_result, *_ = _sdk()

    async def body(client: Any) -> None:
        await client.session.send_request(cancel_request(params=params(taskId=task_id)), any_result)

    _run(server, "tasks/cancel", body)


def update_task(server: McpServer, task_id: str, responses: Mapping[str, Any]) -> None:
    """``tasks/update``: answer a task's ``inputRequests`` (keys as the server issued them)."""
    any_result, update_params, update_request = _sdk()[4], _sdk()[6], _sdk()[7]

    async def body(client: Any) -> None:
        await client.session.send_request(update_request(params=update_params(taskId=task_id, inputResponses=dict(responses))), any_result)

    _run(server, "tasks/update", body)


def content_of(result: Mapping[str, Any]) -> Any:
    """What the model is told of a ``CallToolResult``: its structured content, else its text."""
    if result.get("structuredContent") is not None:
        return result["structuredContent"]
    texts = [block.get("text", "") for block in result.get("content") or [] if block.get("type") == "text"]
    others = [block for block in result.get("content") or [] if block.get("type") != "text"]
    if others:
        return {"text": "\n".join(texts), "content": others}
    return "\n".join(texts)
