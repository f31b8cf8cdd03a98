"""Tools: functions with pydantic argument models and a declared effect class."""

from longstep.tools.registry import Effect, Tool, ToolContext, ToolRegistry, tool

__all__ = ["Effect", "Tool", "ToolContext", "ToolRegistry", "tool"]
