"""Longstep runtime: durable steps, tools and model providers for long-horizon agents.

The public API is what this module exports (``from longstep import Agent, tool, Effect, ...``);
docs, examples and the projects ``longstep init`` writes import only from here. Each name is
loaded on first use, so a Lambda that imports one module of the runtime pays for no other.

This package is shipped as the Lambda layer. It imports nothing from ``longstep_kit``,
``longstep_functions`` or the project's agents: the doors run one way (``.importlinter``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from longstep.exports import lazy_exports

__version__ = "0.1.0"

# name -> the module that defines it (a module itself where the value is None).
_EXPORTS: dict[str, str | None] = {
    # an agent and what it is made of
    "Agent": "longstep.agent",
    "Verdict": "longstep.policy",
    "World": "longstep.world",
    # tools and their effect classes
    "tool": "longstep.tools.registry",
    "ToolRegistry": "longstep.tools.registry",
    "ToolContext": "longstep.tools.registry",
    "Effect": "longstep.tools.registry",
    "ProbeAnswer": "longstep.tools.registry",
    "LedgerEntry": "longstep.tools.registry",
    "ToolInputError": "longstep.errors",
    # what an agent's tools need from AWS
    "Table": "longstep.resources",
    "Grant": "longstep.resources",
    "Secret": "longstep.resources",
    "READ_ITEM_ACTIONS": "longstep.resources",
    "WRITE_ITEM_ACTIONS": "longstep.resources",
    "READ_WRITE_ITEM_ACTIONS": "longstep.resources",
    "SCAN_ACTIONS": "longstep.resources",
    # MCP servers as a source of tools (docs/mcp.md)
    "McpServer": "longstep.mcp.declare",
    "McpTool": "longstep.mcp.declare",
    "IDEMPOTENCY_META_KEY": "longstep.mcp.declare",
    # code-defined workflows
    "Workflow": "longstep.workflows.definition",
    "WorkflowContext": "longstep.workflows.context",
    "StepInfo": "longstep.workflows.context",
    "StepFailedError": "longstep.workflows.context",
    "Call": "longstep.workflows.context",
    "NonDeterminismError": "longstep.errors",
    # the runtime's services a tool may use: AWS clients made once, the (virtual) clock
    "clients": None,
    "clock": None,
}

__all__ = sorted([*_EXPORTS, "__version__"])


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


if TYPE_CHECKING:  # what type checkers and IDEs see; at run time each name loads on first use
    from longstep import clients, clock  # noqa: F401
    from longstep.agent import Agent  # noqa: F401
    from longstep.errors import NonDeterminismError, ToolInputError  # noqa: F401
    from longstep.mcp.declare import IDEMPOTENCY_META_KEY, McpServer, McpTool  # noqa: F401
    from longstep.policy import Verdict  # noqa: F401
    from longstep.resources import READ_ITEM_ACTIONS, READ_WRITE_ITEM_ACTIONS, SCAN_ACTIONS, WRITE_ITEM_ACTIONS, Grant, Secret, Table  # noqa: F401
    from longstep.tools.registry import Effect, LedgerEntry, ProbeAnswer, ToolContext, ToolRegistry, tool  # noqa: F401
    from longstep.workflows.context import Call, StepFailedError, StepInfo, WorkflowContext  # noqa: F401
    from longstep.workflows.definition import Workflow  # noqa: F401
    from longstep.world import World  # noqa: F401
