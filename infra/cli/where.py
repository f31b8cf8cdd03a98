"""``--where`` on the single-run verbs: ``longstep stop|resume|signal --where EXPR`` (and
``longstep redrive --where EXPR``) act on a selection through the bulk operation
(``longstep bulk VERB``: a dry run first if asked, a bounded rate, an audit record, resumable)."""

from __future__ import annotations

import argparse
from typing import Any, Callable

from longstep_kit.cli.errors import CliError

Command = Callable[[argparse.Namespace], int]


def add_where(p: argparse.ArgumentParser, verb: str) -> None:
    """The selection options of ``verb``'s bulk form on its single-run parser."""
    from longstep_kit.cli.fleet_cmds import _rate
    from longstep_kit.ops.bulk import DEFAULT_RATE

    p.add_argument("--where", metavar="EXPR", help=f"{verb} every run this selects instead of one (docs/fleet.md has the grammar)")
    p.add_argument("--dry-run", action="store_true", help="with --where: print the selection and its count; do nothing")
    p.add_argument("--rate", type=_rate, default=DEFAULT_RATE, help=f"with --where: runs per second (default {DEFAULT_RATE:g})")


def one_or_where(verb: str, single: Command, run_id: str = "run_id") -> Command:
    """``single`` for one run, the bulk operation for ``--where``; exactly one of the two.

    Raises:
        CliError: neither or both were given, or a bulk-only flag came without ``--where``.
    """

    def command(args: argparse.Namespace) -> int:
        named = getattr(args, run_id, None)
        if args.where is None:
            if named is None:
                raise CliError(f"{run_id}: name the run to {verb}, or select runs with --where EXPR")
            if args.dry_run:
                raise CliError("--dry-run: only with --where (a selection to print)")
            return single(args)
        if named is not None:
            raise CliError(f"{run_id}: give a run id or --where, not both")
        return _bulk(verb, args)

    return command


def _bulk(verb: str, args: argparse.Namespace) -> int:
    """``longstep bulk VERB`` with the single-run verb's options."""
    from longstep_kit.cli.fleet_cmds import cmd_bulk

    bulk = argparse.Namespace(**vars(args))
    bulk.verb, bulk.operation = verb, None
    bulk.force = bool(getattr(args, "force", False))
    bulk.reason = getattr(args, "reason", None) or "stopped by a bulk operation"
    bulk.state_machine_arn = getattr(args, "state_machine_arn", None)
    return cmd_bulk(bulk)


def register_redrive(sub: Any) -> None:
    """``longstep redrive --where EXPR``: failed runs again, each gated by a replay on the code deployed now."""
    from longstep_kit.cli.fleet_cmds import _targets

    p = sub.add_parser(
        "redrive",
        help="redrive the failed runs a --where selects, each only if its replay on the deployed code does not diverge. "
        'Example: longstep redrive --where "status=failed AND tenant=acme" --dry-run',
    )
    add_where(p, "redrive")
    p.add_argument("--force", action="store_true", help="also the runs whose replay diverges on the code deployed now")
    _targets(p)
    p.set_defaults(func=_redrive, run_id=None)


def _redrive(args: argparse.Namespace) -> int:
    if args.where is None:
        raise CliError('--where: redrive needs a selection, e.g. --where "status=failed AND tenant=acme"', hint="one run: longstep resume RUN_ID")
    return _bulk("redrive", args)
