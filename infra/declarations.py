"""What a project's stack is built from besides the configuration: its agents' and workflows'
declarations (resources, conditions, MCP secrets, inline tools), read without the CDK.

The local stack keys its synth cache on these (``longstep_kit.local.synth``): reading them imports
the agents but starts no Node.js, so a run can tell in a fraction of a second whether the template
it synthesized before still holds.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from longstep.agents import load_agent
from longstep.errors import UnknownAgentError
from longstep.mcp.catalog import servers_of as mcp_servers
from longstep.mcp.catalog import warnings as mcp_warnings
from longstep.mcp.tasks import task_conditions as mcp_task_conditions
from longstep.resources import Resource, ResourceDeclarationError, Secret, check_resources
from longstep_kit.agent_warnings import unprobed_warnings
from longstep_kit.config import CONTEXT_KEY, ConfigError


def agent_declarations(
    project_dir: Path, agents: dict[str, str], warn: bool = True
) -> tuple[dict[str, tuple[Resource, ...]], dict[str, tuple[str, ...]]]:
    """Import each configured agent (from the project) and read the resources and the conditions
    (``Agent.conditions``: its CheckCondition function is granted nothing without one) it declares.

    Args:
        project_dir: the project the agents live in.
        agents: agent name -> ``"module:callable"``.
        warn: print what an agent leaves undeclared (an MCP tool's effect, a probe) on stderr.

    Raises:
        ConfigError: one line naming ``longstep.agents.<name>``: the reference cannot be imported
            or built, or its resources are invalid.
    """
    if str(project_dir) not in sys.path:  # the agents are the project's packages
        sys.path.insert(0, str(project_dir))
    declared, conditions = {}, {}
    for name, reference in sorted(agents.items()):
        field = f"{CONTEXT_KEY}.agents.{name}"
        try:
            agent = load_agent(reference)
            declared[name] = check_resources(name, agent.resources)
            # A long-running MCP tool's polls are condition checks (longstep.mcp.tasks).
            conditions[name] = tuple(sorted(agent.conditions)) + mcp_task_conditions(agent)
            for line in [f"warning: {field}: {w}" for w in mcp_warnings(agent)] + list(unprobed_warnings(agent)) if warn else []:
                print(line, file=sys.stderr)  # the first: what an undeclared MCP tool defaults to
        except (UnknownAgentError, ResourceDeclarationError) as exc:
            raise ConfigError(f"{field}: {_one_line(exc)}") from None
        except Exception as exc:  # the user's module failed while importing or building its agent
            raise ConfigError(f"{field}: building {reference!r} failed: {type(exc).__name__}: {_one_line(exc)}") from None
    return declared, conditions


def catalog_secrets(agents: dict[str, str]) -> dict[str, tuple[str, ...]]:
    """Each agent's declared secrets that its MCP servers list their tools with (imported already
    by ``agent_declarations``).

    Raises:
        ConfigError: an MCP server's secret is not among the agent's resources.
    """
    found = {}
    for name, reference in sorted(agents.items()):
        agent = load_agent(reference)
        declared = {item.name for item in agent.resources if isinstance(item, Secret)}
        names = tuple(sorted({server.secret.name for server in mcp_servers(agent) if server.secret is not None}))
        missing = sorted(set(names) - declared)
        if missing:
            raise ConfigError(
                f"{CONTEXT_KEY}.agents.{name}: an MCP server's secret {missing[0]!r} is not in the agent's resources (add the Secret there)"
            )
        found[name] = names
    return found


def inline_tools(config: Any) -> dict[str, tuple[str, ...]]:
    """Each agent's read tools that run inside ModelTurn (``Agent.inline_read_tools``; imported
    already by ``agent_declarations``): such an agent gets a ModelTurn function of its own.

    Raises:
        ConfigError: an agent inlines, and ModelTurn's timeout leaves no time for an inline call
            (one starts only with CallTool's timeout left: ``longstep.tasks.inline_tools``).
    """
    found = {name: tuple(sorted(load_agent(reference).inline_tools())) for name, reference in sorted(config.agents.items())}
    inlining = sorted(name for name, tools in found.items() if tools)
    if inlining and config.model_timeout_seconds <= config.tool_timeout_seconds:
        raise ConfigError(
            f"{CONTEXT_KEY}.model_timeout_seconds: {config.model_timeout_seconds} leaves agent {inlining[0]!r}'s inline read tools no time; "
            f"it must be above tool_timeout_seconds ({config.tool_timeout_seconds}), the time an inline call needs left"
        )
    return found


def workflow_declarations(project_dir: Path, workflows: dict[str, str]) -> dict[str, tuple[Resource, ...]]:
    """Import each configured workflow (from the project) and read the resources it declares.

    Raises:
        ConfigError: one line naming ``longstep.workflows.<name>``.
    """
    from longstep.errors import UnknownWorkflowError
    from longstep.workflows.definition import load_workflow

    if str(project_dir) not in sys.path:
        sys.path.insert(0, str(project_dir))
    declared = {}
    for name, reference in sorted(workflows.items()):
        field = f"{CONTEXT_KEY}.workflows.{name}"
        try:
            declared[name] = check_resources(name, tuple(load_workflow(reference).resources))
        except (UnknownWorkflowError, ResourceDeclarationError) as exc:
            raise ConfigError(f"{field}: {_one_line(exc)}") from None
        except Exception as exc:  # the user's module failed while importing or building its workflow
            raise ConfigError(f"{field}: building {reference!r} failed: {type(exc).__name__}: {_one_line(exc)}") from None
    return declared


def code_references(config: Any) -> list[str]:
    """The ``module:callable`` references whose packages make the functions' code asset."""
    return [*config.agents.values(), *config.workflows.values()]


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


@dataclass(frozen=True)
class Declarations:
    """Everything the stack reads of the project's agents and workflows: with the configuration and
    the kit, the whole of what the template depends on. The bytes of the agents' code are not in it
    (they are the functions' code asset), so an edit of a tool's body leaves it unchanged and the
    local stack reuses its synthesized template (``longstep_kit.local.synth``).

    Attributes:
        agent_resources: agent name -> the resources it declares (tables, grants, secrets).
        agent_conditions: agent name -> the conditions its CheckCondition function polls.
        agent_catalog_secrets: agent name -> the secrets its MCP servers list their tools with.
        agent_inline_tools: agent name -> its read tools that run inside ModelTurn.
        workflow_resources: workflow name -> the resources it declares.
    """

    agent_resources: dict[str, tuple[Resource, ...]]
    agent_conditions: dict[str, tuple[str, ...]]
    agent_catalog_secrets: dict[str, tuple[str, ...]]
    agent_inline_tools: dict[str, tuple[str, ...]]
    workflow_resources: dict[str, tuple[Resource, ...]]

    def manifest(self) -> str:
        """The declarations as canonical JSON (resources by their dataclass repr: their fields, in order)."""
        return json.dumps(
            {name: {k: repr(v) for k, v in sorted(part.items())} for name, part in sorted(vars(self).items())},
            sort_keys=True,
        )


def read_declarations(project_dir: Path, config: Any, warn: bool = True) -> Declarations:
    """Import the configured agents and workflows and read what the stack is built from.

    Raises:
        ConfigError: one line naming the agent or workflow whose declarations are invalid.
    """
    resources, conditions = agent_declarations(project_dir, config.agents, warn=warn)
    return Declarations(
        agent_resources=resources,
        agent_conditions=conditions,
        agent_catalog_secrets=catalog_secrets(config.agents),
        agent_inline_tools=inline_tools(config),
        workflow_resources=workflow_declarations(project_dir, config.workflows),
    )
