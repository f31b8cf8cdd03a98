"""The agents a deployment serves, loaded from configuration.

The stack writes ``LONGSTEP_AGENTS`` (a JSON object of agent name -> ``"module:callable"``) into
every function that runs agent code; the module is the user's, bundled into the function's code.
The callable is called once per process and its :class:`~longstep.agent.Agent` reused.
"""

from __future__ import annotations

import json
import threading
from typing import Callable, Mapping

from longstep import environment
from longstep.agent import Agent
from longstep.errors import UnknownAgentError
from longstep.references import REFERENCE, import_callable
from longstep.settings import ENV_AGENTS, SettingsError


_built: dict[tuple[str, str], Agent] = {}
_lock = threading.Lock()


def parse_agents(raw: str | None) -> dict[str, str]:
    """The agent references in a ``LONGSTEP_AGENTS`` value.

    Raises:
        SettingsError: the value is not a JSON object of names to ``module:callable`` strings.
    """
    if not raw or not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise SettingsError(f"environment variable {ENV_AGENTS} is not JSON: {exc.msg}") from None
    if not isinstance(value, dict):
        raise SettingsError(f"environment variable {ENV_AGENTS} must be a JSON object")
    for name, ref in value.items():
        if not isinstance(ref, str) or not REFERENCE.match(ref):
            raise SettingsError(f"{ENV_AGENTS}.{name}: expected 'module:callable', got {ref!r}")
    return dict(value)


def load_agent(reference: str) -> Agent:
    """Import ``module:callable`` and build the agent it returns.

    Raises:
        UnknownAgentError: the module or callable does not exist, or does not return an Agent.
    """
    agent = import_callable(reference, "agent", UnknownAgentError)()
    if not isinstance(agent, Agent):
        attr = reference.partition(":")[2]
        raise UnknownAgentError(f"agent {reference!r}: {attr}() returned {type(agent).__name__}, not an Agent")
    return agent


class AgentCatalog:
    """Finds agents by the name start inputs use.

    Args:
        references: agent name -> ``"module:callable"``.
    """

    def __init__(self, references: Mapping[str, str]) -> None:
        self.references = dict(references)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "AgentCatalog":
        """The catalog ``LONGSTEP_AGENTS`` describes (the function's environment by default: ``longstep.environment``)."""
        env = environment.environ() if environ is None else environ
        return cls(parse_agents(env.get(ENV_AGENTS)))

    def __call__(self, name: str) -> Agent:
        """The agent called ``name`` (built once per process).

        Raises:
            UnknownAgentError: naming the ``agent`` field and the agents that exist.
        """
        reference = self.references.get(name)
        if reference is None:
            known = ", ".join(sorted(self.references)) or "none"
            raise UnknownAgentError(f"agent: unknown agent {name!r}; registered agents: {known}")
        key = (name, reference)
        with _lock:
            if key not in _built:
                _built[key] = load_agent(reference)
            return _built[key]


AgentResolver = Callable[[str], Agent]


def resolve_agent(name: str) -> Agent:
    """The agent called ``name`` in this function's ``LONGSTEP_AGENTS``."""
    return AgentCatalog.from_env()(name)
