"""An agent: a system prompt, a tool registry and limits."""

from __future__ import annotations

from dataclasses import dataclass

from longstep.policy import Verifier
from longstep.tools.builtins import WAIT_FOR, wait_for_tool
from longstep.tools.registry import ToolRegistry


@dataclass(frozen=True)
class Agent:
    """What the model is told and what it may do.

    Attributes:
        name: the name start inputs use.
        system_prompt: the system prompt of every model call.
        tools: the tools the model may call.
        verifier: checks the final answer; a rejection is fed back to the model.
        max_model_corrections: consecutive turns of model errors (unknown tool, bad arguments,
            empty reply) the model may correct before the run escalates.
        max_verifier_failures: consecutive rejected final answers before the run escalates.
    """

    name: str
    system_prompt: str
    tools: ToolRegistry
    verifier: Verifier | None = None
    max_model_corrections: int = 3
    max_verifier_failures: int = 2

    def __post_init__(self) -> None:
        if WAIT_FOR not in self.tools.tools:  # every agent can wait; the caller's registry is left as it was
            combined = ToolRegistry(dict(self.tools.tools))
            combined.register(wait_for_tool())
            object.__setattr__(self, "tools", combined)
