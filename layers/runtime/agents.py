"""The agents a deployment serves, loaded from configuration.

The stack writes ``LONGSTEP_AGENTS`` (a JSON object of agent name -> ``"module:callable"``) into
every function that runs agent code; the module is the user's, bundled into the function's code.
The callable is called once per process and its :class:`~longstep.agent.Agent` reused.
"""

from __future__ import annotations

from typing import Callable, Mapping

from longstep import environment
from longstep.agent import Agent
from longstep.errors import UnknownAgentError
from longstep.references import ReferenceCatalog, import_callable, parse_references
from longstep.settings import ENV_AGENTS


def parse_agents(raw: str | None) -> dict[str, str]:
    """The agent references in a ``LONGSTEP_AGENTS`` value.

    Raises:
        SettingsError: the value is not a JSON object of names to ``module:callable`` strings.
    """
    return parse_references(raw, ENV_AGENTS)


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


class AgentCatalog(ReferenceCatalog[Agent]):
    """Finds agents by the name start inputs use (each built once per process).

    Args:
        references: agent name -> ``"module:callable"``.
    """

    kind = "agent"
    error = UnknownAgentError
    build = staticmethod(load_agent)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "AgentCatalog":
        """The catalog ``LONGSTEP_AGENTS`` describes (the function's environment by default: ``longstep.environment``)."""
        env = environment.environ() if environ is None else environ
        return cls(parse_agents(env.get(ENV_AGENTS)))


AgentResolver = Callable[[str], Agent]


def resolve_agent(name: str) -> Agent:
    """The agent called ``name`` in this function's ``LONGSTEP_AGENTS``."""
    return AgentCatalog.from_env()(name)
