"""A real MCP server (the ``mcp`` SDK's ``MCPServer``, streamable HTTP on 127.0.0.1) for the example
agent: a parts depot. Its ledger lists every effect it performs, so duplicates are counted from the
server's own books, not from what the client believes it did.

- ``lookup_part``: a read (``readOnlyHint``).
- ``reserve_part``: deduplicates on the idempotency key in ``_meta`` (a repeat returns the first
  reservation and performs nothing).
- ``ship_order``: cannot deduplicate: every call ships; ``find_shipment`` tells whether a shipment
  with a reference exists (the agent's probe asks it).
- ``build_report``: long-running through the Tasks extension: the call creates a task (one per
  idempotency key), which completes on its third ``tasks/get``; ``tasks/cancel`` cancels it.
"""

from __future__ import annotations

import datetime as dt
import logging
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from mcp.server.mcpserver import Context, Extension, MCPServer, MethodBinding
from mcp_types import RequestParams, ToolAnnotations

from longstep import IDEMPOTENCY_META_KEY

TASKS = "io.modelcontextprotocol/tasks"
POLLS_TO_COMPLETE = 3
STARTUP_SECONDS = 10.0


@dataclass
class Depot:
    """The depot's state: its stock, its ledger of effects, its tasks."""

    ledger: list[dict[str, Any]] = field(default_factory=list)
    reservations: dict[str, dict[str, Any]] = field(default_factory=dict)
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    task_by_key: dict[str, str] = field(default_factory=dict)
    polls_to_complete: int = POLLS_TO_COMPLETE
    poll_interval_ms: int = 60_000  # what its tasks suggest to their pollers
    token: str | None = None  # the bearer token it accepts (None: any request)
    refused: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self) -> None:
        """Forget everything (a test's next case starts from an empty depot, as its world does)."""
        with self.lock:
            self.ledger.clear()
            self.reservations.clear()
            self.tasks.clear()
            self.task_by_key.clear()
            self.polls_to_complete = POLLS_TO_COMPLETE
            self.poll_interval_ms = 60_000
            self.refused = 0
            self.token = None

    def effects(self, tool: str, run_id: str) -> list[dict[str, Any]]:
        """The ledger's entries of ``tool`` for one run (keys are ``run_id:turn:call``)."""
        return [e for e in self.ledger if e["tool"] == tool and str(e["key"]).startswith(f"{run_id}:")]


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _report(region: str) -> str:
    """A region's stock report; ``all`` lists every part (about 400 KB: more than a state may carry)."""
    if region == "all":
        return "\n".join(f"P-{n:06d}: 12 in stock, reorder at 5" for n in range(12_000))
    return f"report for {region}: 3 parts low"


def build_server(depot: Depot) -> Any:
    """The MCP server over ``depot``."""

    class TaskParams(RequestParams):
        taskId: str

    def key_of(ctx: Any) -> str:
        return str((ctx.meta or {}).get(IDEMPOTENCY_META_KEY) or "")

    class DepotTasks(Extension):
        identifier = TASKS

        def methods(self) -> Any:
            async def get(ctx: Any, params: TaskParams) -> dict[str, Any]:
                with depot.lock:
                    task = depot.tasks[params.taskId]
                    if task["status"] == "working":
                        task["polls"] += 1
                        if task["polls"] >= depot.polls_to_complete:
                            task["status"] = "completed"
                            task["result"] = {"content": [{"type": "text", "text": _report(task["region"])}], "isError": False}
                    shown = {k: v for k, v in task.items() if k not in ("polls", "region", "key")}
                return {"resultType": "complete", **shown, "lastUpdatedAt": _now()}

            async def cancel(ctx: Any, params: TaskParams) -> dict[str, Any]:
                with depot.lock:
                    task = depot.tasks[params.taskId]
                    if task["status"] == "working":
                        task["status"] = "cancelled"
                        depot.ledger.append({"tool": "cancel_report", "key": task["key"]})
                return {"resultType": "complete"}

            return [MethodBinding("tasks/get", TaskParams, get), MethodBinding("tasks/cancel", TaskParams, cancel)]

        async def intercept_tool_call(self, params: Any, ctx: Any, call_next: Any) -> Any:
            if params.name != "build_report":
                return await call_next(ctx)
            key = key_of(ctx)
            with depot.lock:
                if key and key in depot.task_by_key:  # the same call again: the same task
                    task_id = depot.task_by_key[key]
                else:
                    task_id = str(uuid.uuid4())
                    region = str((params.arguments or {}).get("region", "all"))
                    depot.tasks[task_id] = {
                        "taskId": task_id,
                        "status": "working",
                        "createdAt": _now(),
                        "ttlMs": None,
                        "pollIntervalMs": depot.poll_interval_ms,
                        "polls": 0,
                        "region": region,
                        "key": key,
                    }
                    depot.task_by_key[key] = task_id
                    depot.ledger.append({"tool": "build_report", "key": key})
                task = {k: v for k, v in depot.tasks[task_id].items() if k not in ("polls", "region", "key", "result")}
            return {"resultType": "task", **task, "lastUpdatedAt": _now()}

    # MCPServer configures the root logger (logging.basicConfig) when it has no handler: keep the
    # process's logging as it was, so the depot's requests are not printed among a run's lines.
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    server = MCPServer("depot", extensions=[DepotTasks()], log_level="WARNING")
    root.handlers[:], root.level = handlers, level

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def lookup_part(sku: str) -> dict[str, Any]:
        """Stock and price of a part, by SKU."""
        return {"sku": sku, "in_stock": 12, "price_cents": 499}

    @server.tool(annotations=ToolAnnotations(idempotent_hint=True))
    def reserve_part(sku: str, quantity: int, ctx: Context) -> dict[str, Any]:
        """Reserve a quantity of a part; the idempotency key makes a repeat harmless."""
        key = key_of(ctx.request_context)
        with depot.lock:
            if key not in depot.reservations:
                depot.reservations[key] = {"reservation": f"R-{len(depot.reservations) + 1}", "sku": sku, "quantity": quantity}
                depot.ledger.append({"tool": "reserve_part", "key": key})
            return depot.reservations[key]

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    def ship_order(reservation: str, address: str, ctx: Context) -> dict[str, Any]:
        """Ship a reservation to an address (every call ships: it cannot be undone or deduplicated)."""
        key = key_of(ctx.request_context)
        with depot.lock:
            shipment = {"shipped": reservation, "to": address, "reference": key}
            depot.ledger.append({"tool": "ship_order", "key": key, "shipment": shipment})
            return shipment

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def find_shipment(reference: str) -> dict[str, Any]:
        """Whether a shipment was made with this reference."""
        with depot.lock:
            found = [e for e in depot.ledger if e["tool"] == "ship_order" and e["key"] == reference]
        return {"found": bool(found), "shipment": found[0]["shipment"] if found else None}

    @server.tool()
    def build_report(region: str) -> str:
        """Build a stock report for a region (long-running: the server answers with a task)."""
        return "unreachable: the tasks extension answers this call"

    return server


@dataclass
class DepotProcess:
    """The depot served on 127.0.0.1 (a random free port) in a thread of this process."""

    depot: Depot = field(default_factory=Depot)
    _server: Any = None
    _thread: threading.Thread | None = None
    server: Any = None  # the MCPServer (a test changes its catalog under a live run)
    port: int = 0

    @property
    def url(self) -> str:
        """The MCP endpoint."""
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> "DepotProcess":
        """Serve until ``stop``; returns when the server accepts connections (or raises after 10 s)."""
        import uvicorn

        self.server = build_server(self.depot)
        app = _guarded(self.server.streamable_http_app(), self.depot)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self._server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on"))
        self._thread = threading.Thread(target=self._server.run, name="depot-mcp", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + STARTUP_SECONDS
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"the depot MCP server did not start on 127.0.0.1:{self.port} within {STARTUP_SECONDS} s")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        """Stop serving (waits at most 10 s)."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=STARTUP_SECONDS)


def _guarded(app: Any, depot: Depot) -> Any:
    """Refuse a request without the depot's bearer token (HTTP 401), as a real server would."""

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and depot.token is not None:
            sent = dict(scope.get("headers") or []).get(b"authorization", b"").decode()
            if sent != f"Bearer {depot.token}":
                depot.refused += 1
                await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await app(scope, receive, send)

    return guarded
