"""What the kit warns about an agent before it runs or deploys, without the CDK: a local run
says it before it starts (``longstep local run`` imports this, not ``app.py``, whose import
starts the CDK's Node.js process), and ``app.py`` says it at synth."""

from __future__ import annotations

from typing import Any

from longstep.mcp.catalog import servers_of as mcp_servers


def unprobed_warnings(agent: Any) -> list[str]:
    """A warning for each ``at_most_once`` tool of ``agent`` without a probe: a crash right after its
    effect leaves the outcome unknown, and with nothing to ask the run escalates to a human. An MCP
    tool left to the defaults is not named twice: ``mcp_warnings`` says what it defaults to."""
    from longstep.tools.registry import Effect

    defaulted = {name for server in mcp_servers(agent) for name, decl in server.tools.items() if decl is None or decl.effect is None}
    return [
        f"warning: agent {agent.name!r}: tool {name!r} is at_most_once with no probe: a crash right after its effect "
        "escalates the run to a human (give it probe=...: docs/durability.md)"
        for name, item in sorted(agent.tools.tools.items())
        if item.effect is Effect.AT_MOST_ONCE and item.probe is None and name not in defaulted
    ]
