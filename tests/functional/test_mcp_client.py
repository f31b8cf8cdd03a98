"""longstep.mcp against real MCP servers on 127.0.0.1 (the SDK's ``MCPServer``, and plain HTTP
servers answering what a broken or guarded endpoint answers): the Tasks extension's client side,
the failure classes of each error, the catalog and its comparison, declarations and hints."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest
import uvicorn

from examples.mcp_agent import agent as depot_agent
from examples.mcp_agent.server import POLLS_TO_COMPLETE
from longstep import IDEMPOTENCY_META_KEY, Agent, Effect, McpServer, McpTool, ToolRegistry
from longstep.errors import McpAuthError, McpProtocolError, ServiceUnavailableError, ToolInputError
from longstep.mcp import catalog, client
from longstep.mcp.declare import mcp_call
from longstep.tools.registry import ToolContext


@pytest.fixture()
def depot():
    process = depot_agent.depot()
    process.depot.reset()
    return process


def _server(depot, **tools):
    return McpServer("depot", url=depot.url, tools=tools or {"lookup_part": McpTool(effect=Effect.READ)}, headers={"X-Api-Key": "sekrit-123"})


class _Answering:
    """A plain HTTP server on 127.0.0.1 answering every request with one status."""

    def __init__(self, status: int) -> None:
        async def app(scope, receive, send):
            if scope["type"] == "http":
                await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": b"no"})

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "the test server did not start within 10 s"
            time.sleep(0.02)
        return f"http://127.0.0.1:{self.port}/mcp"

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.mark.parametrize(("status", "error"), [(401, McpAuthError), (403, McpAuthError), (503, ServiceUnavailableError), (404, McpProtocolError)])
def test_http_failures_map_onto_the_failure_classes_and_name_no_credential(status, error):
    with _Answering(status) as url:
        server = McpServer("guarded", url=url, tools={"a": None}, headers={"X-Api-Key": "sekrit-123"})
        with pytest.raises(error) as raised:
            client.list_tools(server)
    assert f"HTTP {status}" in str(raised.value) and "sekrit" not in str(raised.value)


def test_an_unreachable_server_is_transient():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there
    server = McpServer("gone", url=f"http://127.0.0.1:{port}/mcp", tools={"a": None}, timeout_seconds=2)
    with pytest.raises(ServiceUnavailableError, match="could not be reached"):
        client.list_tools(server)


def test_a_wrong_call_is_the_models_to_correct(depot):
    server = _server(depot)
    call = mcp_call(server.register(ToolRegistry()).get("lookup_part"))
    ctx = ToolContext(run_id="r", turn=0, call=0, idempotency_key="r:0:0")
    with pytest.raises(ToolInputError, match="sku"):  # isError: the server's validation says what is wrong
        call(call_args({"sku": 5}), ctx)
    assert call(call_args({"sku": "P-1"}), ctx) == {"sku": "P-1", "in_stock": 12, "price_cents": 499}


def call_args(raw):
    from longstep.mcp.declare import McpArguments

    return McpArguments.model_validate(raw)


def test_the_tasks_extension_client_side(depot):
    server = _server(depot)
    first = client.call_tool(server, "build_report", {"region": "north"}, {IDEMPOTENCY_META_KEY: "r:2:0"})
    again = client.call_tool(server, "build_report", {"region": "north"}, {IDEMPOTENCY_META_KEY: "r:2:0"})
    task_id = first["task"]["taskId"]
    assert first["task"]["status"] == "working" and again["task"]["taskId"] == task_id  # the key: one task
    states = [client.get_task(server, task_id)["status"] for _ in range(POLLS_TO_COMPLETE)]
    assert states == ["working"] * (POLLS_TO_COMPLETE - 1) + ["completed"]
    assert client.content_of(client.get_task(server, task_id)["result"]) == "report for north: 3 parts low"
    other = client.call_tool(server, "build_report", {"region": "south"}, {IDEMPOTENCY_META_KEY: "r:3:0"})["task"]["taskId"]
    client.cancel_task(server, other)
    assert client.get_task(server, other)["status"] == "cancelled"
    assert [e["tool"] for e in depot.depot.ledger] == ["build_report", "build_report", "cancel_report"]


def test_the_catalog_records_schemas_and_hints_and_a_change_is_reported(depot):
    agent = Agent(
        name="d",
        system_prompt="x",
        tools=_server(depot, lookup_part=None, reserve_part=McpTool(effect=Effect.KEYED), missing_tool=None).register(ToolRegistry()),
    )
    recorded = catalog.fetch(agent)
    tools = recorded["depot"]["tools"]
    assert set(tools) == {"lookup_part", "reserve_part"} and recorded["depot"]["missing"] == ["missing_tool"]
    assert tools["lookup_part"]["annotations"]["readOnlyHint"] is True
    assert tools["reserve_part"]["inputSchema"]["required"] == ["sku", "quantity"]
    run = {catalog.RUN_FIELD: json.dumps(recorded)}
    specs = {s["toolSpec"]["name"]: s["toolSpec"] for s in catalog.specs(agent, run)}
    assert "missing_tool" not in specs and specs["reserve_part"]["inputSchema"]["json"]["required"] == ["sku", "quantity"]
    assert catalog.compare(recorded, catalog.fetch(agent)) == []
    changed = json.loads(json.dumps(recorded))
    changed["depot"]["tools"]["reserve_part"]["inputSchema"]["required"] = ["sku"]
    changed["depot"]["hash"] = "other"
    assert catalog.compare(changed, recorded) == ["depot/reserve_part: its description, schema or annotations changed"]


def test_undeclared_tools_default_to_at_most_once_with_approval_unless_read_only(depot):
    server = _server(depot, lookup_part=None, ship_order=McpTool())
    registry = server.register(ToolRegistry())
    assert {name: (registry.get(name).effect, registry.get(name).requires_approval) for name in ("lookup_part", "ship_order")} == {
        "lookup_part": (Effect.AT_MOST_ONCE, True),
        "ship_order": (Effect.AT_MOST_ONCE, True),
    }
    assert len(server.warnings()) == 2 and "depot/ship_order declares no effect" in server.warnings()[1]
    run = {catalog.RUN_FIELD: json.dumps(catalog.fetch(Agent(name="d", system_prompt="x", tools=registry)))}
    use = {"name": "lookup_part", "input": {}}
    assert registry.get("lookup_part").route(use, run) == {"approval": False}  # the server's readOnlyHint
    assert registry.get("ship_order").route(use, run) == {"approval": True}  # destructiveHint: a human decides


@pytest.mark.parametrize(
    ("decl", "message"),
    [
        (McpTool(effect=Effect.AT_MOST_ONCE, long_running=True), "long-running tool must be read or keyed"),
        (McpTool(effect=Effect.KEYED, long_running=True, requires_approval=True), "cannot require approval"),
        (McpTool(effect=Effect.CHECK_THEN_ACT), "check_then_act"),
        (McpTool(effect=Effect.KEYED, probe=lambda a, c: None), "probe is only for at_most_once"),
    ],
)
def test_a_bad_declaration_is_one_line_naming_the_tool(decl, message):
    with pytest.raises(ValueError, match=message) as raised:
        McpServer("depot", url="http://127.0.0.1:1/mcp", tools={"build_report": decl})
    assert "McpServer.tools['build_report']" in str(raised.value) and "\n" not in str(raised.value)


LOOSE = McpServer("loose", url="http://127.0.0.1:1/mcp", tools={"lookup": McpTool(effect=Effect.READ), "delete_all": None, "rename": McpTool()})


def loose_agent() -> Agent:
    """An agent leaving two MCP tools to the defaults (synth reads it; the server is never called)."""
    return Agent(name="loose", system_prompt="x", tools=LOOSE.register(ToolRegistry()))


def secretless_agent() -> Agent:
    """An agent whose MCP server's secret is not among its resources."""
    from longstep import Secret

    server = McpServer("s", url="http://127.0.0.1:1/mcp", tools={"a": McpTool(effect=Effect.READ)}, secret=Secret("s_token", secret_id="x/y"))
    return Agent(name="secretless", system_prompt="x", tools=server.register(ToolRegistry()))


def test_synth_warns_once_per_tool_left_to_the_defaults(capsys):
    from pathlib import Path

    from longstep_kit.declarations import agent_declarations

    _, conditions = agent_declarations(Path(__file__).resolve().parents[2], {"loose": "tests.functional.test_mcp_client:loose_agent"})
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert lines == [
        "warning: longstep.agents.loose: MCP tool loose/delete_all declares no effect: it runs at_most_once and needs approval unless the server marks it readOnlyHint",
        "warning: longstep.agents.loose: MCP tool loose/rename declares no effect: it runs at_most_once and needs approval unless the server marks it readOnlyHint",
    ]
    assert conditions == {"loose": ()}  # no long-running tool: its CheckCondition needs no grants


def test_synth_refuses_an_mcp_secret_missing_from_the_resources():
    from longstep_kit.declarations import catalog_secrets
    from longstep_kit.config import ConfigError

    with pytest.raises(ConfigError, match="longstep.agents.secretless: an MCP server's secret 's_token' is not in the agent's resources"):
        catalog_secrets({"secretless": "tests.functional.test_mcp_client:secretless_agent"})
    assert catalog_secrets({"depot": "examples.mcp_agent.agent:build"}) == {"depot": ("depot_token",)}
