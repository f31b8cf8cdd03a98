"""Live runs: ``watch`` a run's event stream as it happens, and steer it (``send``, ``pause``, ``stop``).

``watch`` follows the stream from the checkpoint table (``longstep.events``) until the run's
latest execution has ended; its exit code is ``status``'s (0 succeeded, 1 anything else). With
``--output json`` it prints one JSON object per line (``offset``, ``type``, ``at`` and the event's
data), so a script can follow a run, and after a drop resume with ``--from LAST`` (the last offset
it has: it gets exactly the events after it, as an SSE client does with ``Last-Event-ID``).
Steering writes durable inputs the run takes at its next step boundary (``longstep_kit.ops.steer``).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from longstep_kit.cli.errors import EXIT_OK, EXIT_RUN_FAILED, CliError


def _targets(args: argparse.Namespace) -> tuple[str, str]:
    from longstep_kit.cli.aws_cmds import stack_output

    arn = args.state_machine_arn or stack_output(args, "StateMachineArn")
    table = args.checkpoint_table or stack_output(args, "CheckpointTableName")
    return arn, table


def _store(args: argparse.Namespace, table: str) -> Any:
    from longstep.store import CheckpointStore

    return CheckpointStore(table, args.aws.client("dynamodb"))


def cmd_watch(args: argparse.Namespace) -> int:
    from longstep import keys
    from longstep.events import EventLog
    from longstep_kit.ops import live, runs

    arn, table = _targets(args)
    store = _store(args, table)
    sfn = args.aws.client("stepfunctions")
    if store.get(args.run_id, keys.RUN_RECORD) is None and not runs.run_executions(sfn, arn, args.run_id):
        raise CliError(f"run_id: no run named {args.run_id!r}", hint="list runs with `longstep runs`")
    last: dict[str, str] = {}

    def status() -> str:
        try:
            latest = runs.latest_execution(sfn, arn, args.run_id)
        except runs.RunNotFoundError:
            return "RUNNING"  # started, not yet visible: keep following
        last["status"] = sfn.describe_execution(executionArn=latest["executionArn"])["status"]
        return last["status"]

    as_json = args.output == "json"
    for event in live.follow(EventLog(store), args.run_id, status, after=args.from_offset, poll_seconds=args.poll_seconds):
        print(json.dumps(event, default=str) if as_json else live.describe(event), flush=True)
    ended = last.get("status", "UNKNOWN")
    stop = _stopped(store, args.run_id)
    shown = "STOPPED" if stop and ended == "SUCCEEDED" else ended
    if as_json:
        print(json.dumps({"type": "watch.ended", "run_id": args.run_id, "status": shown}), flush=True)
    else:
        print(f"run {args.run_id}: {shown}" + (f" ({stop})" if stop and shown == "STOPPED" else ""), flush=True)
    return EXIT_OK if shown == "SUCCEEDED" else EXIT_RUN_FAILED


def _stopped(store: Any, run_id: str) -> str | None:
    """The reason the run was stopped, when its final record says so."""
    from longstep import keys

    final = store.get(run_id, keys.FINAL_RECORD) or {}
    output = final.get("output")
    output = json.loads(output) if isinstance(output, str) else output
    if isinstance(output, dict) and output.get("status") == "STOPPED":
        return str(output.get("stop_reason") or "stopped")
    return None


def _offset(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an offset (0, 1, 2...), got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"an offset is 0 or more, got {value}")
    return value


def _add_targets(p: argparse.ArgumentParser) -> None:
    from longstep_kit.cli.aws_cmds import add_stack_options

    add_stack_options(p)
    p.add_argument("--checkpoint-table", help="use this checkpoint table instead of the stack's")


def register(sub: Any) -> None:
    watch = sub.add_parser(
        "watch",
        help="follow a run's events live until it ends (exit code as status). Example: longstep watch triage-001 --output json",
    )
    watch.add_argument("run_id")
    watch.add_argument(
        "--from",
        dest="from_offset",
        type=_offset,
        default=-1,
        metavar="OFFSET",
        help="the last offset already seen: print the events after it (default: the whole stream)",
    )
    watch.add_argument("--poll-seconds", type=float, default=0.5, help=argparse.SUPPRESS)
    _add_targets(watch)
    watch.set_defaults(func=cmd_watch)
