"""Longstep runs offered to MCP clients (``longstep mcp``): an ``MCPServer`` of the SDK whose tools
start a run, tell its status, follow its events, list and decide its approvals, send it a message
and stop it, all through ``longstep_kit.client.Client`` with the caller's AWS credentials (or the
local stack's).

Served over stdio (a coding assistant starts ``longstep mcp``) or streamable HTTP on 127.0.0.1
only: whoever reaches the port acts with these credentials, so no other address is offered.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from longstep_kit.client import Client

# A follow returns within this long when nothing new happens (the client calls again with the last offset).
MAX_WAIT_SECONDS = 30.0
MAX_EVENTS = 200
INSTRUCTIONS = (
    "Longstep runs durable agents. start_run starts one; run_events follows what it does (call again "
    "with next_after); list_approvals and decide_approval answer the approvals it waits on; send_message "
    "steers it at its next model turn; stop_run stops it at the next step boundary."
)


def _one_line_errors(fn: Any) -> Any:
    """A tool whose expected failures (a bad field, an unknown run, a refused AWS call) reach the
    client as one line naming the problem, with no traceback in the server's log."""
    import functools

    from botocore.exceptions import ClientError
    from mcp.server.mcpserver.exceptions import ToolError

    from longstep.errors import LongstepError

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (LongstepError, ValueError, KeyError, ClientError) as exc:
            raise ToolError(" ".join(str(exc).split()) or type(exc).__name__) from None

    return wrapped


def build_server(client: Client) -> Any:
    """The MCP server over ``client``'s stack."""
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations

    read = ToolAnnotations(read_only_hint=True)
    # MCPServer configures the root logger when it has none: the command's output stays its own.
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    from longstep_kit.mcp_tasks import extension

    # A client that speaks the Tasks extension gets a run as a task (longstep_kit.mcp_tasks).
    server = MCPServer("longstep", instructions=INSTRUCTIONS, log_level="WARNING", extensions=[extension(client)])
    root.handlers[:], root.level = handlers, level

    @server.tool(annotations=ToolAnnotations(idempotent_hint=True))
    @_one_line_errors
    def start_run(run_id: str, agent: str, goal: str, max_turns: int | None = None, model: dict[str, Any] | None = None) -> dict[str, Any]:
        """Start a run of an agent on a goal (the run id names it; starting it again is refused while it runs)."""
        payload: dict[str, Any] = {"run_id": run_id, "agent": agent, "goal": goal}
        if max_turns is not None:
            payload["max_turns"] = max_turns
        if model is not None:
            payload["model"] = model
        from longstep.inputs import StartInput, parse_model

        parse_model(StartInput, payload, "start input")  # each bad field named, before any AWS call
        return {"run_id": run_id, "execution": client.start(payload)}

    @server.tool(annotations=read)
    @_one_line_errors
    def run_status(run_id: str) -> dict[str, Any]:
        """The status of a run's latest execution: RUNNING, SUCCEEDED, FAILED, ABORTED, TIMED_OUT."""
        return {"run_id": run_id, "status": client.status(run_id)}

    @server.tool(annotations=read)
    @_one_line_errors
    def run_events(run_id: str, after: int = -1, wait_seconds: float = 0.0) -> dict[str, Any]:
        """The run's events after offset ``after`` (at most 200), waiting up to ``wait_seconds``
        (at most 30) for one when there is none yet; call again with ``next_after``."""
        deadline = time.monotonic() + min(max(wait_seconds, 0.0), MAX_WAIT_SECONDS)
        while True:
            # The status first: once it reads as ended, every event the run wrote is in the log, so
            # an empty page after it means the follow is over.
            status = client.status(run_id)
            found = client.events(run_id, after)[:MAX_EVENTS]
            if found or status != "RUNNING" or time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        return {"run_id": run_id, "status": status, "events": found, "next_after": found[-1]["offset"] if found else after}

    @server.tool(annotations=read)
    @_one_line_errors
    def list_approvals(run_id: str | None = None) -> dict[str, Any]:
        """Pending approval requests (of one run when given): the tool, its arguments, the id to decide."""
        return {"approvals": client.approvals(run_id)}

    @server.tool()
    @_one_line_errors
    def decide_approval(approval_id: str, decision: str, reason: str | None = None, edited_input: dict[str, Any] | None = None) -> dict[str, Any]:
        """Decide a pending approval: ``approve``, ``reject`` (give a reason) or ``edit`` (give the arguments to run)."""
        return client.decide(approval_id, decision, reason, edited_input)

    @server.tool()
    @_one_line_errors
    def send_message(run_id: str, text: str) -> dict[str, Any]:
        """Queue a message for the run's next model turn."""
        return {"run_id": run_id, "place": client.send(run_id, text)}

    @server.tool(annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True))
    @_one_line_errors
    def stop_run(run_id: str, reason: str = "stopped through MCP") -> dict[str, Any]:
        """Stop the run (and its children) at the next step boundary."""
        return {"run_id": run_id, "stopped": client.stop(run_id, reason)}

    return server


def http_server(server: Any, port: int = 0) -> tuple[Any, str]:
    """A uvicorn server of ``server``'s streamable HTTP app on 127.0.0.1 (``port`` 0: a free one), and its URL."""
    import socket

    import uvicorn

    if not port:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
    config = uvicorn.Config(server.streamable_http_app(), host="127.0.0.1", port=port, log_level="warning")
    return uvicorn.Server(config), f"http://127.0.0.1:{port}/mcp"
