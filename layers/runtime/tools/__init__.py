"""Tools: functions with pydantic argument models and a declared effect class."""

from longstep.tools.registry import Effect, LedgerEntry, ProbeAnswer, Tool, ToolContext, ToolRegistry, tool

__all__ = ["Effect", "LedgerEntry", "ProbeAnswer", "Tool", "ToolContext", "ToolRegistry", "tool"]
