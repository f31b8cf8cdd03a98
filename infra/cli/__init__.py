"""The ``longstep`` command. Each group of subcommands lives in its own module and registers
itself through ``register(subparsers)``; ``main`` dispatches to the chosen ``func``.

Every command takes ``--region``, ``--profile``, ``--endpoint-url`` and ``--output text|json``
(before or after the command's name), errors are one line (``longstep_kit.cli.errors``), and the
exit codes are documented there and in docs/operations.md.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from longstep_kit.cli import (
    approval_cmds,
    aws_cmds,
    dev_cmd,
    eval_cmd,
    export_cmds,
    fleet_cmds,
    fork_cmd,
    init_cmd,
    live_cmds,
    local_cmds,
    replay_cmd,
    seed_cmd,
    smoke_cmd,
    ui_cmd,
    mcp_cmd,
    versions_cmd,
    views_cmds,
)
from longstep_kit.cli.aws import Aws, add_aws_options
from longstep_kit.cli.errors import report

COMMAND_MODULES = (
    init_cmd,
    dev_cmd,
    local_cmds,
    aws_cmds,
    views_cmds,
    live_cmds,
    export_cmds,
    approval_cmds,
    replay_cmd,
    fork_cmd,
    eval_cmd,
    versions_cmd,
    ui_cmd,
    fleet_cmds,
    mcp_cmd,
    smoke_cmd,
    seed_cmd,
)


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error (the usage is one ``--help`` away)."""

    def error(self, message: str):  # type: ignore[override]
        print(f"error: {message} (hint: {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


def _version() -> str:
    import importlib.metadata

    return importlib.metadata.version("longstep")


def _add_common_options(parser: argparse.ArgumentParser, suppress: bool) -> None:
    """The common options; on a command's parser they default to nothing, so that a value given
    before the command's name is not overwritten."""
    if suppress:
        _add_suppressed_aws_options(parser)
    else:
        add_aws_options(parser)
    unset = argparse.SUPPRESS
    parser.add_argument("--output", choices=("text", "json", "table"), default=unset if suppress else "text", help="output format (default text)")
    parser.add_argument(
        "--query", default=unset if suppress else None, help="a JMESPath expression applied to the JSON output, e.g. \"[?status=='failed'].run_id\""
    )
    parser.add_argument("--debug", action="store_true", default=unset if suppress else False, help="show tracebacks of unexpected errors")


def _add_suppressed_aws_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("AWS")
    group.add_argument("--region", default=argparse.SUPPRESS, help="AWS region, e.g. eu-west-1")
    group.add_argument("--profile", default=argparse.SUPPRESS, help="named profile of ~/.aws/config")
    group.add_argument("--endpoint-url", default=argparse.SUPPRESS, help="send every request here, e.g. http://127.0.0.1:4566")


def parser() -> argparse.ArgumentParser:
    root = _Parser(
        prog="longstep",
        description="Durable long-horizon agents on AWS Step Functions. Example: longstep local run events/scenarios/triage.json",
    )
    root.add_argument("--version", action="version", version=f"longstep {_version()}")
    _add_common_options(root, suppress=False)
    sub = root.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.register(sub)
    for command in _commands(sub):  # the common options after the command's name too
        _add_common_options(command, suppress=True)
    return root


def _commands(sub: argparse._SubParsersAction) -> list[argparse.ArgumentParser]:
    """Every command's parser, nested ones too (``local run``, ``local advance``)."""
    found = []
    for command in sub.choices.values():
        found.append(command)
        for action in command._actions:
            if isinstance(action, argparse._SubParsersAction):
                found += _commands(action)
    return found


def main(argv: Sequence[str] | None = None) -> int:
    from longstep_kit.local.synth import quiet_node_banner

    quiet_node_banner()
    args = parser().parse_args(argv)
    given = list(sys.argv[1:] if argv is None else argv)
    # `--output text` given outright prints data as the AWS CLI's text (the default is the text view).
    args.output_given = any(a == "--output" or a.startswith("--output=") for a in given)
    from longstep_kit.cli.structured import wants_data

    if wants_data(args) and hasattr(args, "json"):
        args.json = True
    from longstep_kit.local.scenario import ScenarioError

    try:
        args.aws = Aws.from_args(args)  # a bad --endpoint-url is a usage error, reported below
        with args.aws.served_clock():  # against `local serve`, "now" is the stack's virtual clock
            return args.func(args)
    except BrokenPipeError:
        # The reader went away (`longstep runs | head`): not an error. Point stdout at devnull so
        # that the interpreter's final flush does not fail again.
        # https://docs.python.org/3/library/signal.html#note-on-sigpipe
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except ScenarioError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - one line for the user, never a traceback
        return report(exc, debug=args.debug)


if __name__ == "__main__":
    sys.exit(main())
