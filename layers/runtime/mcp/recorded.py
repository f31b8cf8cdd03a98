"""The MCP catalog a run recorded when it started, as the run record holds it (read on every turn)."""

from __future__ import annotations

import json
from typing import Any, Mapping

# The run record's field holding the recorded catalog.
RUN_FIELD = "mcp_catalog"


def recorded_catalog(run: Mapping[str, Any]) -> dict[str, Any]:
    """The catalog the run recorded when it started (JSON in the run record: a schema's nulls and
    numbers stay exactly as the server sent them); empty without one."""
    raw = run.get(RUN_FIELD)
    return json.loads(raw) if isinstance(raw, str) and raw else {}


def read_only(run: Mapping[str, Any], server: str, tool: str) -> bool:
    """Whether the run's recorded catalog marks the tool read-only (the server's hint)."""
    entry = recorded_catalog(run).get(server, {}).get("tools", {}).get(tool) or {}
    return bool(entry.get("annotations", {}).get("readOnlyHint"))
