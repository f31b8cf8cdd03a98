"""``longstep dev``: one command for the loop a developer lives in.

It serves the local stack as ``longstep local serve`` does (moto's endpoint, the approval pages,
real time), with the run UI on in the same process and hot reload on (an edited tool runs on the
next invocation, ``longstep_kit.local.reload``), and prints one URL to open. With ``--scenario``
the scenario's world is seeded; with ``--start`` its run starts at once and its steps are printed
as they happen, while the UI follows it.
"""

from __future__ import annotations

import argparse
from typing import Any


def cmd_dev(args: argparse.Namespace) -> int:
    from longstep_kit.cli.errors import CliError
    from longstep_kit.cli.serve_cmd import cmd_local_serve

    if args.start and not args.scenario:
        raise CliError("--start: name the scenario to start, e.g. --scenario events/scenarios/triage.json --start")
    args.ui = True
    return cmd_local_serve(args)


def register(sub: Any) -> None:
    from longstep_kit.cli.serve_cmd import add_serve_options

    dev = sub.add_parser(
        "dev",
        help="serve the local stack with the run UI and hot reload: one command, one URL",
        description="Deploy the stack into moto and serve it (as `longstep local serve`) with the run UI on and edited agent "
        "code picked up on the next invocation, until Ctrl-C. Example: longstep dev --scenario events/scenarios/triage.json --start",
    )
    add_serve_options(dev)
    dev.add_argument("--ui-port", type=int, default=0, help="port of the run UI (default: a free one)")
    dev.add_argument("--start", action="store_true", help="start the --scenario's run at once and print its steps")
    dev.set_defaults(func=cmd_dev)
