"""Building a project's CDK app: the ``app.py`` of a Longstep project calls :func:`main`.

A project is a directory holding ``cdk.json`` (the ``longstep`` context: the deployment config
and the agents), ``app.py`` and the packages its agents live in.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import longstep_kit.jsii_relay  # noqa: F401  (first: jsii's Node.js warnings as text, not b'...')
import aws_cdk as cdk

from longstep.agents import load_agent
from longstep.errors import UnknownAgentError
from longstep.mcp.catalog import servers_of as mcp_servers
from longstep.mcp.catalog import warnings as mcp_warnings
from longstep.mcp.tasks import task_conditions as mcp_task_conditions
from longstep.resources import Resource, ResourceDeclarationError, Secret, check_resources
from longstep_kit.agent_warnings import unprobed_warnings
from longstep_kit.bundling import BundlingError, build_function_code, build_layer, default_cache
from longstep_kit.config import CONTEXT_KEY, ConfigError, load_config
from longstep_kit.stacks.longstep_stack import LongstepStack


def agent_declarations(project_dir: Path, agents: dict[str, str]) -> tuple[dict[str, tuple[Resource, ...]], dict[str, tuple[str, ...]]]:
    """Import each configured agent (from the project) and read the resources and the conditions
    (``Agent.conditions``: its CheckCondition function is granted nothing without one) it declares.

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
            for line in mcp_warnings(agent):  # what an undeclared MCP tool defaults to
                print(f"warning: {field}: {line}", file=sys.stderr)
            for line in unprobed_warnings(agent):
                print(line, file=sys.stderr)
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


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def build_app(project_dir: Path, context: dict | None = None, outdir: str | None = None) -> cdk.App:
    """The project's app with its stack (tests pass ``context`` and ``outdir``; ``cdk`` passes them itself).

    Raises:
        ConfigError: the ``longstep`` context is invalid (the message names each bad key).
        BundlingError: an asset could not be built.
    """
    app = cdk.App(context=context or {}, outdir=outdir) if (context or outdir) else cdk.App()
    config = load_config(app.node.try_get_context(CONTEXT_KEY))
    if not config.agents:
        raise ConfigError(f'{CONTEXT_KEY}.agents: name at least one agent, e.g. {{"triage": "agents.triage:build"}}')
    declared, conditions = agent_declarations(project_dir, config.agents)
    cache = default_cache(project_dir)
    LongstepStack(
        app,
        config.stack_name,
        config=config,
        layer_dir=build_layer(cache),
        function_code_dir=build_function_code(project_dir, [*config.agents.values(), *config.workflows.values()], cache),
        agent_resources=declared,
        agent_conditions=conditions,
        agent_catalog_secrets=catalog_secrets(config.agents),
        agent_inline_tools=inline_tools(config),
        workflow_resources=workflow_declarations(project_dir, config.workflows),
    )
    return app


def main(project_dir: Path) -> int:
    """Synthesize the project's app; a configuration or bundling error is one line and exit code 2."""
    import time

    began = time.perf_counter()
    # On stderr, which the CDK CLI shows: a synth is silent for half a minute otherwise.
    print("longstep: building the app's stack (agents, functions, the state machine)...", file=sys.stderr, flush=True)
    try:
        app = build_app(project_dir)
    except (ConfigError, BundlingError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"longstep: built in {time.perf_counter() - began:.1f} s; synthesizing the template...", file=sys.stderr, flush=True)
    app.synth()
    print(f"longstep: synthesized in {time.perf_counter() - began:.1f} s", file=sys.stderr, flush=True)
    return 0
