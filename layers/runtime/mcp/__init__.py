"""MCP servers as an agent's tools, called as durable steps ([MCP](../../../docs/mcp.md)).

An agent declares a server (``McpServer``: its streamable HTTP URL, headers, a ``Secret`` for its
credential) and how it uses each of the server's tools (``McpTool``: effect class, approval,
probe, ledger, long-running through the Tasks extension). ``McpServer.register`` adds them to the
agent's registry, where they run like any Python tool.
"""

from longstep.mcp.declare import IDEMPOTENCY_META_KEY, McpServer, McpTool

__all__ = ["IDEMPOTENCY_META_KEY", "McpServer", "McpTool"]
