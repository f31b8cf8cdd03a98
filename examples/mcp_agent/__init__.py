"""docs/mcp.md's example: an agent whose tools come from a real MCP server (``server.py``)."""
