"""An agent's own code on the local stack, outside any invocation: world fixtures and ledgers.

Fixture loaders and effect ledgers run in the local stack's process, but with the environment
(and code) of the agent's CallTool function, so they name the same tables the agent's tools use.
They run as the harness, not under the function's role: seeding a world and counting what a run
did are an operator's reads and writes, not the agent's. The kit knows nothing of any agent's
world: the agent declares it (``Agent.world``, ``ledger=`` on its tools).
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlparse

from longstep.agent import Agent
from longstep.agents import AgentCatalog
from longstep.environment import use_environment
from longstep.resources import ENV_AGENT
from longstep_kit.local.resources import CALL_TOOL_HANDLER
from longstep_kit.local.scenario import Scenario, check_against_agent
from longstep_kit.local.stack import LocalStack


class AgentFunctionNotFoundError(LookupError):
    """The local stack has no CallTool function for the agent."""


@dataclass(frozen=True)
class AgentFunction:
    """The deployed function that runs an agent's tool calls.

    Attributes:
        name: the function's name.
        environment: its environment variables.
        code_dir: the directory of its code asset (None: no asset known).
    """

    name: str
    environment: dict[str, str]
    code_dir: Path | None


def agent_function(stack: LocalStack, agent: str) -> AgentFunction:
    """The CallTool function of ``agent`` (the one whose ``LONGSTEP_AGENT`` names it).

    Raises:
        AgentFunctionNotFoundError: the stack has none (the agent is not registered).
    """
    lam = stack.client("lambda")
    for page in lam.get_paginator("list_functions").paginate():
        for fn in page["Functions"]:
            variables = dict((fn.get("Environment") or {}).get("Variables") or {})
            if fn.get("Handler") == CALL_TOOL_HANDLER and variables.get(ENV_AGENT) == agent:
                return AgentFunction(fn["FunctionName"], variables, _code_dir(stack, fn["FunctionName"]))
    raise AgentFunctionNotFoundError(f"agent: no CallTool function for agent {agent!r} on the local stack")


def _code_dir(stack: LocalStack, function_name: str) -> Path | None:
    # moto's GetFunction answers a code Location whose path is the deployed asset's S3 key.
    location: str = stack.client("lambda").get_function(FunctionName=function_name).get("Code", {}).get("Location", "")
    return stack.dispatcher.code_dirs.get(urlparse(location).path.lstrip("/"))


@contextlib.contextmanager
def agent_context(stack: LocalStack, agent: str) -> Iterator[Agent]:
    """The agent built as its CallTool function builds it, with that function's environment bound."""
    function = agent_function(stack, agent)
    if function.code_dir is not None and str(function.code_dir) not in sys.path:
        sys.path.append(str(function.code_dir))  # as the dispatcher does before an invocation
    with use_environment(function.environment):
        yield AgentCatalog.from_env()(agent)


def check_and_seed(stack: LocalStack, scenario: Scenario, source: str = "scenario") -> None:
    """Check the scenario against the deployed agent, then load its world with the agent's loader.

    Raises:
        ScenarioError: the scenario does not fit the agent (one line naming the field).
    """
    with agent_context(stack, scenario.input.agent) as agent:
        world: Any = check_against_agent(scenario, agent, source)
        if world is not None and agent.world is not None:
            agent.world.load(world)
