"""``longstep replay EXPORT...``: re-execute exported runs on the current code; non-zero on divergence.

The CI step before ``cdk deploy`` (docs/deploy.md): runs exported from the deployed stack must
replay on the code about to replace it. Needs no AWS: the agents come from the project's
``cdk.json`` and the export holds everything recorded.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from longstep_kit.cli.errors import EXIT_OK, EXIT_RUN_FAILED, CliError


def load_export(path: str) -> dict[str, Any]:
    """The JSON of an export file.

    Raises:
        CliError: the file is missing or not JSON (exit 2).
    """
    from longstep.errors import BadRequestError
    from longstep.json_input import parse_json

    try:
        data = parse_json(Path(path).read_text(), path)
    except OSError as exc:
        raise CliError(f"{path}: cannot read: {exc.strerror}") from None
    except BadRequestError as exc:
        raise CliError(str(exc)) from None
    if not isinstance(data, dict):
        raise CliError(f"{path}: not a `longstep export` file (a JSON object)")
    return data


def cmd_replay(args: argparse.Namespace) -> int:
    from longstep.errors import InvalidInputError
    from longstep_kit.ops.replay import replay_export
    from longstep_kit.project import agent_catalog

    catalog = agent_catalog(Path(args.project) if args.project else None)
    reports = []
    for path in args.exports:
        try:
            reports.append((path, replay_export(load_export(path), catalog)))
        except InvalidInputError as exc:
            raise CliError(f"{path}: {exc}") from None
    if args.output == "json":
        print(json.dumps([{"file": path, **r.to_json()} for path, r in reports], indent=2))
    else:
        for path, r in reports:
            head = "ok" if r.ok else "DIVERGED"
            print(
                f"{head} {path}: run {r.name}, {r.turns} turns, {r.calls} tool calls replayed (recorded on code {r.recorded_code_version or 'unknown'})"
            )
            print("".join(f"  divergence: {d}\n" for d in r.divergences) + "".join(f"  note: {n}\n" for n in r.notes), end="")
    return EXIT_OK if all(r.ok for _, r in reports) else EXIT_RUN_FAILED


def register(sub: Any) -> None:
    replay = sub.add_parser(
        "replay",
        help="re-execute exported runs on the current code; exit 1 if any diverges (the CI step before cdk deploy)",
        description="Re-execute `longstep export` files against the current agent code with the recorded model "
        "replies and tool results. Exit 0: every run replays; 1: a run diverges; 2: a file is unreadable.",
    )
    replay.add_argument("exports", nargs="+", metavar="EXPORT", help="files written by `longstep export`")
    replay.add_argument("--project", help="the project directory (default: the nearest with cdk.json and app.py)")
    replay.set_defaults(func=cmd_replay)
