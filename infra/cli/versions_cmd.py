"""``longstep versions``: the deploys' state machine versions and the runs pinned to each;
``longstep versions prune [--dry-run]`` removes the unused ones (docs/deploy.md "Pinning")."""

from __future__ import annotations

import argparse
import json
from typing import Any


def cmd_versions(args: argparse.Namespace) -> int:
    from longstep_kit.cli.aws_cmds import stack_output
    from longstep_kit.ops import versions

    arn = args.state_machine_arn or stack_output(args, "StateMachineArn")
    sfn = args.aws.client("stepfunctions")
    if args.action == "prune":
        pruned = versions.prune(sfn, args.aws.client("lambda"), arn, dry_run=args.dry_run)
        verb = "would delete" if args.dry_run else "deleted"
        if args.output == "json":
            print(
                json.dumps(
                    {"dry_run": args.dry_run, "state_machine_versions": pruned.state_machine_versions, "function_versions": pruned.function_versions}
                )
            )
        else:
            print(f"{verb} {len(pruned.state_machine_versions)} state machine versions, {len(pruned.function_versions)} function versions")
            for item in pruned.state_machine_versions + pruned.function_versions:
                print(f"  {item}")
        return 0
    listed = versions.list_versions(sfn, arn)
    if args.output == "json":
        print(
            json.dumps(
                [
                    {"arn": v.arn, "version": v.number, "aliases": v.aliases, "running": v.running, "compatible_code_versions": sorted(v.compatible)}
                    for v in listed
                ]
            )
        )
        return 0
    for v in listed:
        aliases = f" [{', '.join(v.aliases)}]" if v.aliases else ""
        print(f"version {v.number}{aliases}: {len(v.running)} running" + (f" ({', '.join(v.running)})" if v.running else ""))
    return 0


def register(sub: Any) -> None:
    parser = sub.add_parser("versions", help="the deploys' state machine versions and the runs pinned to each; 'prune' removes unused ones")
    parser.add_argument("action", nargs="?", choices=["prune"], help="prune: delete versions no run uses and no alias routes to")
    parser.add_argument("--dry-run", action="store_true", help="with prune: list what would be deleted")
    parser.add_argument("--stack", default="Longstep", help="deployed stack name (default Longstep)")
    parser.add_argument("--state-machine-arn", help="use this state machine instead of the stack's")
    parser.set_defaults(func=cmd_versions)
