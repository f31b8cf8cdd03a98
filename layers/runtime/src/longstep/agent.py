"""An agent: a system prompt, a tool registry and limits."""

from __future__ import annotations

from dataclasses import dataclass

from longstep.tools.registry import ToolRegistry


@dataclass(frozen=True)
class Agent:
    """What the model is told and what it may do.

    Attributes:
        name: the name start inputs use.
        system_prompt: the system prompt of every model call.
        tools: the tools the model may call.
    """

    name: str
    system_prompt: str
    tools: ToolRegistry
