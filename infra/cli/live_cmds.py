"""Live runs: ``watch`` a run's event stream as it happens, and steer it (``send``, ``pause``, ``stop``;
``resume`` is in ``aws_cmds``).

``watch`` follows the stream from the checkpoint table (``longstep.events``) until the run's
latest execution has ended, and ends with the run's status (``longstep.run_status``: succeeded,
stopped, failed...); its exit code is ``status``'s (0 succeeded, 1 anything else, stopped included). With
``--output json`` it prints one JSON object per line (``offset``, ``type``, ``at`` and the event's
data), so a script can follow a run, and after a drop resume with ``--from LAST`` (the last offset
it has: it gets exactly the events after it, as an SSE client does with ``Last-Event-ID``).
Steering writes durable inputs the run takes at its next step boundary (``longstep_kit.ops.steer``).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from longstep_kit.cli.where import add_where, one_or_where
from longstep_kit.cli.errors import EXIT_OK, CliError
from longstep_kit.cli.targets import add_stack_options, checkpoint_store, steering_of, targets


def cmd_watch(args: argparse.Namespace) -> int:
    from longstep import keys
    from longstep.events import EventLog
    from longstep_kit.ops import live, runs

    arn, table = targets(args)
    store = checkpoint_store(args, table)
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
    from longstep import run_status

    final = store.get(args.run_id, keys.FINAL_RECORD) or {}
    ended = last.get("status", "UNKNOWN")
    shown = run_status.of_ended(ended, final.get("output"))
    reason = run_status.stop_reason(final.get("output"))
    if as_json:
        print(json.dumps({"type": "watch.ended", "run_id": args.run_id, "status": shown, "execution_status": ended, "reason": reason}), flush=True)
    else:
        print(f"run {args.run_id}: {shown}" + (f" ({reason})" if reason else ""), flush=True)
    return run_status.exit_code(shown)


def _say(args: argparse.Namespace, shown: dict[str, Any], line: str) -> int:
    print(json.dumps(shown) if args.output == "json" else line)
    return EXIT_OK


def cmd_send(args: argparse.Namespace) -> int:
    index = steering_of(args).send(args.run_id, args.message)
    return _say(args, {"run_id": args.run_id, "message": index}, f"run {args.run_id}: message {index} queued for its next model turn")


def cmd_pause(args: argparse.Namespace) -> int:
    changed = steering_of(args).pause(args.run_id)
    note = "pauses at its next model turn (no compute while paused); `longstep resume` continues it" if changed else "was paused already"
    return _say(args, {"run_id": args.run_id, "paused": True, "changed": changed}, f"run {args.run_id}: {note}")


def cmd_stop(args: argparse.Namespace) -> int:
    stopped = steering_of(args).stop(args.run_id, args.reason)
    children = f" (and {len(stopped) - 1} child runs)" if len(stopped) > 1 else ""
    line = f"run {args.run_id}{children}: stops at its next step boundary; calls not yet run are recorded as cancelled"
    return _say(args, {"run_id": args.run_id, "stopping": stopped}, line)


def _offset(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an offset (0, 1, 2...), got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"an offset is 0 or more, got {value}")
    return value


def _add_targets(p: argparse.ArgumentParser) -> None:
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
    send = sub.add_parser(
        "send", help="send a running run a message for its next model turn. Example: longstep send triage-001 --message 'also check BUG-103'"
    )
    send.add_argument("run_id")
    send.add_argument("--message", required=True, help="the text the model is given at its next turn")
    _add_targets(send)
    send.set_defaults(func=cmd_send)
    pause = sub.add_parser("pause", help="pause a running run at its next model turn (no compute while paused; `resume` continues it)")
    pause.add_argument("run_id")
    _add_targets(pause)
    pause.set_defaults(func=cmd_pause)
    stop = sub.add_parser("stop", help="stop a run (and its children) at the next step boundary; a stopped run can be resumed")
    stop.add_argument("run_id", nargs="?")
    stop.add_argument("--reason", default="stopped by the user", help="recorded with the stop and shown by status and watch")
    add_where(stop, "stop")
    _add_targets(stop)
    stop.set_defaults(func=one_or_where("stop", cmd_stop))
