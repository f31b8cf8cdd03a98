"""An agent whose read tools run inside the model turn's invocation (docs/cost.md): every read it
has, or only those it names."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from longstep import Agent, Effect, ToolContext, ToolRegistry, tool

registry = ToolRegistry()


class LookupArgs(BaseModel):
    key: str


@tool(registry, effect=Effect.READ)
def lookup(args: LookupArgs, ctx: ToolContext) -> dict[str, Any]:
    """Look a key up."""
    return {"key": args.key, "found": False}


every_read = Agent(name="reader", system_prompt="Answer from lookups.", tools=registry, inline_read_tools=True)
only_lookup = Agent(name="reader", system_prompt="Answer from lookups.", tools=registry, inline_read_tools=("lookup",))
