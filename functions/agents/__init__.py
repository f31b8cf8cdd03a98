"""The agents this deployment serves, by the name start inputs use."""

from __future__ import annotations

from typing import Callable

from longstep.agent import Agent
from longstep.errors import UnknownAgentError

from agents import triage

_BUILDERS: dict[str, Callable[[], Agent]] = {"triage": triage.build}
_built: dict[str, Agent] = {}


def resolve_agent(name: str) -> Agent:
    """The agent called ``name``.

    Raises:
        UnknownAgentError: naming the ``agent`` field and the agents that exist.
    """
    if name not in _BUILDERS:
        raise UnknownAgentError(f"agent: unknown agent {name!r}; registered agents: {', '.join(sorted(_BUILDERS))}")
    if name not in _built:
        _built[name] = _BUILDERS[name]()
    return _built[name]
