"""``longstep seed SCENARIO``: load a scenario's world into a deployed stack's agent tables, with the
agent's own loader (``Agent.world``), so that the first run on a fresh account has something to work on."""

from __future__ import annotations

import argparse
from typing import Any


def cmd_seed(args: argparse.Namespace) -> int:
    from longstep_kit.cli.errors import CliError
    from longstep_kit.cli.smoke import DeployedStack
    from longstep_kit.local.scenario import load_scenario
    from longstep_kit.local.world import AgentFunctionNotFoundError, check_and_seed
    from longstep_kit.project import find_project

    scenario = load_scenario(args.scenario)  # a bad file: one line, exit 2, before any AWS call
    if scenario.world is None:
        raise CliError(f"{args.scenario}: has no world to seed (its 'world' field is empty)")
    import sys

    root = str(find_project())
    if root not in sys.path:  # the agent's code (its world loader) is the project's
        sys.path.insert(0, root)
    stack = DeployedStack(args.aws, args.stack, args.aws.stack_outputs(args.stack))
    try:
        with stack.agent_code():
            check_and_seed(stack, scenario, args.scenario)  # type: ignore[arg-type]
    except AgentFunctionNotFoundError as exc:
        raise CliError(f"{exc} (stack {args.stack})", hint="is the agent in cdk.json's longstep.agents, and deployed?") from None
    counts = {name: len(value) for name, value in scenario.world.items() if isinstance(value, list)}
    shown = ", ".join(f"{n} {name}" for name, n in counts.items()) or "the world"
    print(f"seeded stack {args.stack} for agent {scenario.input.agent}: {shown} (from {args.scenario})")
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser(
        "seed",
        help="load a scenario's world into a deployed stack's agent tables",
        description="Load the world of a scenario file into the deployed stack's tables of its agent, with the "
        "agent's own loader (the same as a local run seeds). Example: longstep seed events/scenarios/triage.json",
    )
    p.add_argument("scenario", metavar="SCENARIO", help="a scenario file with a world, e.g. events/scenarios/triage.json")
    p.add_argument("--stack", default="Longstep", help="deployed stack name (default Longstep)")
    p.set_defaults(func=cmd_seed)
