"""``longstep fleet``: a concurrency key's slots, its live limit, and a slot given back by hand
(``longstep.concurrency``; docs/fleet.md)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from longstep_kit.cli.errors import EXIT_OK
from longstep_kit.cli.targets import add_stack_options, targets


def cmd_fleet(args: argparse.Namespace) -> int:
    from longstep.concurrency import Slots

    _, table_name = targets(args)
    # The deployment's default limit is the function's setting; a key without a live limit shows 0.
    slots = Slots(args.aws.client("dynamodb"), table_name, args.aws.client("stepfunctions"), 0)
    if args.action == "limit" and args.limit is not None:
        slots.set_limit(args.key, args.limit)
    if args.action == "release":
        if not args.run_id:
            from longstep_kit.cli.errors import CliError

            raise CliError("release: the run id is required (longstep fleet release KEY RUN_ID)")
        slots.release(args.key, args.run_id)
    state: Any = {"key": args.key, **slots.state(args.key)}
    if args.output == "json":
        print(json.dumps(state, indent=2))
    else:
        limit = state["limit"] or "the deployment's"
        print(
            f"key {args.key}: {state['running']} running of {limit}; holders: {', '.join(state['holders']) or '-'}; waiting: {len(state['waiters'])}"
        )
    return EXIT_OK


def _limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of runs, got {text!r}") from None
    if not 1 <= value <= 10_000:
        raise argparse.ArgumentTypeError(f"must be from 1 to 10000 runs, got {text}")
    return value


def register_fleet(sub: Any) -> None:
    p = sub.add_parser("fleet", help="concurrency keys: show a key's slots, set its limit live, give a slot back by hand")
    p.add_argument("action", choices=("show", "limit", "release"), help="show the key; limit: set its limit (live); release: give a run's slot back")
    p.add_argument("key", help="the key's value (a tenant, an agent: the deployment's fleet.concurrency.key)")
    p.add_argument("value", nargs="?", help="limit: the new limit; release: the run id")
    add_stack_options(p)
    p.add_argument("--checkpoint-table", help="use this checkpoint table instead of the stack's")
    p.set_defaults(func=_dispatch)


def _dispatch(args: argparse.Namespace) -> int:
    args.limit = _parse_limit(args) if args.action == "limit" else None
    args.run_id = args.value if args.action == "release" else None
    return cmd_fleet(args)


def _parse_limit(args: argparse.Namespace) -> int | None:
    from longstep_kit.cli.errors import CliError

    if args.value is None:
        return None
    try:
        return _limit(args.value)
    except argparse.ArgumentTypeError as exc:
        raise CliError(f"limit: {exc}") from None
