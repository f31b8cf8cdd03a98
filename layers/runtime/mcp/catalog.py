"""The MCP tool catalog a run sees: fetched from the servers when the run starts, recorded in the
run record, and offered to the model on every turn and every replay of the run.

Each later Init (a resume, or continue-as-new's next execution) fetches the catalog again and
compares: a server whose tools or schemas changed under the live run is reported (an event on the
run's stream and a warning in the log), and the run keeps the catalog it started with, so a
replay offers the model the same tools with the same schemas.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

from longstep.mcp.declare import McpServer, mcp_call
from longstep.mcp.recorded import RUN_FIELD, recorded_catalog

# The event a changed catalog puts on the run's stream.
CATALOG_CHANGED = "mcp.catalog_changed"


def servers_of(agent: Any) -> list[McpServer]:
    """The MCP servers behind an agent's tools, in declaration order, each once."""
    found: dict[str, McpServer] = {}
    for item in agent.tools.tools.values():
        call = mcp_call(item)
        if call is not None:
            found.setdefault(call.server.name, call.server)
    return list(found.values())


def warnings(agent: Any) -> list[str]:
    """One line per MCP tool of the agent left to the defaults (``cdk synth`` and ``local run`` print them)."""
    return [line for server in servers_of(agent) for line in server.warnings()]


def fetch(agent: Any) -> dict[str, Any]:
    """The current catalog of the agent's declared MCP tools (empty for an agent without any).

    Raises:
        ServiceUnavailableError: a server could not be reached (transient: Init is retried).
        McpAuthError: a server refused the credential.
    """
    from longstep.mcp import client

    catalog: dict[str, Any] = {}
    for server in servers_of(agent):
        offered = {tool["name"]: tool for tool in client.list_tools(server)}
        tools = {
            name: {
                "description": offered[name].get("description") or name,
                "inputSchema": offered[name].get("inputSchema") or {"type": "object"},
                "annotations": offered[name].get("annotations") or {},
            }
            for name in server.tools
            if name in offered
        }
        missing = sorted(set(server.tools) - set(offered))
        catalog[server.name] = {"tools": tools, "missing": missing, "hash": _hash(tools)}
    return catalog


def compare(recorded: Mapping[str, Any] | None, current: Mapping[str, Any]) -> list[str]:
    """What changed between the run's recorded catalog and the current one, one line per tool."""
    changes = []
    for server, now in current.items():
        then = (recorded or {}).get(server)
        if then is None or then.get("hash") == now.get("hash"):
            continue
        old, new = then.get("tools", {}), now.get("tools", {})
        for name in sorted(set(old) | set(new)):
            if name not in new:
                changes.append(f"{server}/{name}: no longer offered")
            elif name not in old:
                changes.append(f"{server}/{name}: newly offered (the run keeps its catalog without it)")
            elif old[name] != new[name]:
                changes.append(f"{server}/{name}: its description, schema or annotations changed")
    return changes


def report_changes(rt: Any, run_id: str, recorded: Mapping[str, Any] | None, current: Mapping[str, Any]) -> list[str]:
    """Report a catalog that changed under the live run (an event and a warning); the run keeps its own."""
    changes = compare(recorded, current)
    if changes:
        from longstep.observability import logs

        rt.events.emit(run_id, CATALOG_CHANGED, changes=changes)
        logs.logger().warning(
            "an MCP server's catalog changed under a live run; the run keeps the catalog it started with",
            extra={"run_id": run_id, "changes": changes},
        )
    return changes


def specs(agent: Any, run: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The toolSpecs the model is offered: the registry's, MCP tools as the run's catalog recorded them.

    An MCP tool missing from the recorded catalog (its server did not offer it) is not offered.
    """
    base = agent.tools.specs()
    recorded = recorded_catalog(run)
    if not recorded:
        return base
    offered = {}
    for item in agent.tools.tools.values():
        call = mcp_call(item)
        if call is not None:
            offered[item.name] = recorded.get(call.server.name, {}).get("tools", {}).get(call.tool_name)
    out = []
    for spec in base:
        name = spec["toolSpec"]["name"]
        if name not in offered:
            out.append(spec)
        elif offered[name] is not None:
            entry = offered[name]
            out.append({"toolSpec": {"name": name, "description": entry["description"], "inputSchema": {"json": entry["inputSchema"]}}})
    return out


def start_fields(rt: Any, run_id: str, agent: Any) -> dict[str, Any]:
    """The run record's catalog field for a starting run (nothing for an agent without MCP tools)."""
    if not servers_of(agent):
        return {}
    return {RUN_FIELD: json.dumps(fetch(agent), sort_keys=True)}


def _hash(tools: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(tools, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
