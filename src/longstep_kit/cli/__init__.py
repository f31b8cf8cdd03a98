"""The ``longstep`` command. Each group of subcommands lives in its own module and registers
itself through ``register(subparsers)``; ``main`` dispatches to the chosen ``func``."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from longstep_kit.cli import approval_cmds, aws_cmds, export_cmds, init_cmd, local_cmds, views_cmds

COMMAND_MODULES = (init_cmd, local_cmds, aws_cmds, views_cmds, export_cmds, approval_cmds)


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="longstep", description="Durable long-horizon agents on AWS Step Functions.")
    sub = root.add_subparsers(dest="command", required=True)
    for module in COMMAND_MODULES:
        module.register(sub)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    from longstep_kit.local.synth import quiet_node_banner

    quiet_node_banner()
    args = parser().parse_args(argv)
    from longstep_kit.local.scenario import ScenarioError
    from longstep.errors import LongstepError

    try:
        return args.func(args)
    except (ScenarioError, LongstepError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
