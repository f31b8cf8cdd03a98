"""An MCP client (the SDK's) driving ``longstep mcp --http``: start a run, follow its events,
answer its approvals as they come, and return how it ended ([MCP](../../docs/mcp.md))."""

from __future__ import annotations

import json
from typing import Any, Callable

from mcp import Client


async def call(mcp: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One tool call; a tool's error raises."""
    result = await mcp.call_tool(tool, arguments)
    if result.is_error:
        raise RuntimeError(f"{tool}: {result.content[0].text if result.content else 'failed'}")
    return result.structured_content if result.structured_content is not None else json.loads(result.content[0].text)


async def run_to_the_end(
    url: str, start: dict[str, Any], decide: Callable[[dict[str, Any]], str] = lambda request: "approve", rounds: int = 200
) -> dict[str, Any]:
    """Start the run ``start`` describes and follow it to its end, deciding each approval with ``decide``.

    Each round waits up to 2 s for new events; ``rounds`` bounds the whole follow.
    """
    async with Client(url) as mcp:
        await call(mcp, "start_run", start)
        run_id, after, events, decided = start["run_id"], -1, [], []
        for _ in range(rounds):
            page = await call(mcp, "run_events", {"run_id": run_id, "after": after, "wait_seconds": 2})
            events += page["events"]
            after = page["next_after"]
            for event in page["events"]:
                if event["type"] == "approval.requested":
                    request = {"tool": event.get("tool"), "input": event.get("input"), "approval_id": event["approval_id"]}
                    await call(mcp, "decide_approval", {"approval_id": event["approval_id"], "decision": decide(request)})
                    decided.append(event["approval_id"])
            if page["status"] != "RUNNING" and not page["events"]:
                break
        status = (await call(mcp, "run_status", {"run_id": run_id}))["status"]
        return {"status": status, "events": events, "decided": decided}
