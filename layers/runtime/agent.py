"""An agent: a system prompt, a tool registry and limits."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from longstep.models.settings import ModelSettings
from longstep.policy import Verifier
from longstep.resources import Resource
from longstep.subagents import subagent_tool
from longstep.tools.builtins import WAIT_FOR, builtin_tools
from longstep.tools.registry import Effect, Tool, ToolRegistry
from longstep.world import World


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
        conditions: checks ``wait_for`` can poll on systems that cannot push: ``check(args)``
            returns a result once the condition holds, else None.
        model: the agent's model settings (provider, model id, temperature, max tokens); a start
            input's ``model`` overrides them field by field (``longstep.models.settings``).
        resources: what the tools need from AWS (``longstep.resources``: ``Table``, ``Grant``,
            ``Secret``); the stack grants them to this agent's tool functions only.
        world: the fixtures a local scenario may seed (model and loader); None: no ``world``.
        subagents: names of the agents this one may delegate to (``longstep.subagents``): the
            model sees each as a tool taking a ``goal`` and optional ``inputs``, and a call runs
            a child run of that agent.
        events: the event names this agent's runs may ``wait_for`` (None: any). Declared, a wait
            on another event is refused to the model, and a signal for another event is refused
            to its sender (``longstep.humans.signals.send``) instead of kept where no wait takes it.
        inline_read_tools: run read tools inside the turn's ModelTurn invocation (each still a
            durable step of its own, recorded and replayed as in CallTool): a turn whose calls
            are all such tools goes from ModelTurn to the next ModelTurn, two state transitions
            and one Lambda invocation fewer (docs/cost.md). True: every ``read`` tool that needs
            no approval and no wait (not ``wait_for``, a subagent or an MCP tool that routes
            itself); a tuple: those tools by name. The stack then gives the agent a ModelTurn
            function of its own, granted the reads of the agent's tables and its secrets
            (nothing it writes, and no ``Grant``: name a tool that needs one out).
    """

    name: str
    system_prompt: str
    tools: ToolRegistry
    verifier: Verifier | None = None
    max_model_corrections: int = 3
    max_verifier_failures: int = 2
    conditions: dict[str, Callable[[dict[str, Any]], Any]] = field(default_factory=dict)
    model: ModelSettings = field(default_factory=ModelSettings)
    resources: tuple[Resource, ...] = ()
    world: World | None = None
    subagents: tuple[str, ...] = ()
    events: tuple[str, ...] | None = None
    inline_read_tools: bool | tuple[str, ...] = False

    def __post_init__(self) -> None:
        missing = [t for t in builtin_tools() if t.name not in self.tools.tools]
        if self.subagents:
            clash = sorted(set(self.subagents) & (set(self.tools.tools) | {t.name for t in builtin_tools()}))
            if clash or len(set(self.subagents)) != len(self.subagents):
                raise ValueError(f"subagents: {clash or list(self.subagents)} would name a tool twice (a subagent is a tool of its name)")
            missing += [subagent_tool(name) for name in self.subagents]
        if missing:  # every agent can wait and page through artifacts (and call its subagents); the caller's registry is left as it was
            combined = ToolRegistry(dict(self.tools.tools))
            for item in missing:
                combined.register(item)
            object.__setattr__(self, "tools", combined)
        object.__setattr__(self, "inline_read_tools", _check_inline(self))

    def inline_tools(self) -> frozenset[str]:
        """The names of the tools this agent runs inside ModelTurn (``inline_read_tools``)."""
        if self.inline_read_tools is True:
            return frozenset(name for name, item in self.tools.tools.items() if _inlinable(self, name, item) is None)
        return frozenset(self.inline_read_tools or ())


def _inlinable(agent: Agent, name: str, item: Tool) -> str | None:
    """Why the tool ``name`` cannot run inside ModelTurn, or None when it can."""
    if item.effect is not Effect.READ:
        return f"its effect is {item.effect.value}, not read"
    if item.requires_approval:
        return "it requires approval"
    if name == WAIT_FOR or name in agent.subagents:
        return "it waits (the state machine carries out its wait)"
    if item.route is not None:
        return "it routes itself (an MCP tool: its approval or wait is the state machine's)"
    return None


def _check_inline(agent: Agent) -> bool | tuple[str, ...]:
    value = agent.inline_read_tools
    if isinstance(value, bool):
        return value
    if isinstance(value, str) or not isinstance(value, (tuple, list)):
        raise ValueError(f"inline_read_tools: expected True, False or a tuple of tool names, got {value!r}")
    for name in value:
        item = agent.tools.tools.get(name) if isinstance(name, str) else None
        if item is None:
            raise ValueError(f"inline_read_tools: {name!r} is not a tool of agent {agent.name!r}")
        why = _inlinable(agent, name, item)
        if why is not None:
            raise ValueError(f"inline_read_tools: tool {name!r} cannot run inside ModelTurn: {why}")
    return tuple(dict.fromkeys(value))
