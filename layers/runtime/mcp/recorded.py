"""The MCP catalog a run recorded when it started, as the run record holds it (read on every turn)."""

from __future__ import annotations

from typing import Any, Mapping

from longstep.contract.run import MCP_CATALOG, RunRecord

# The run record's field holding the recorded catalog.
RUN_FIELD = MCP_CATALOG


def recorded_catalog(run: RunRecord | Mapping[str, Any]) -> dict[str, Any]:
    """The catalog the run recorded when it started (JSON in the run record: a schema's nulls and
    numbers stay exactly as the server sent them); empty without one."""
    return RunRecord.of(run).mcp_catalog


def read_only(run: Mapping[str, Any], server: str, tool: str) -> bool:
    """Whether the run's recorded catalog marks the tool read-only (the server's hint)."""
    entry = recorded_catalog(run).get(server, {}).get("tools", {}).get(tool) or {}
    return bool(entry.get("annotations", {}).get("readOnlyHint"))
