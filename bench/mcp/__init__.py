"""The MCP benchmark (issue 26): what a long-running MCP call's 3-day task costs while it waits."""
