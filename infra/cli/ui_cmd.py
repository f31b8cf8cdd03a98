"""``longstep ui``: the run UI (``longstep_kit.ui``) served on 127.0.0.1 with the operator's own AWS
credentials (or ``--endpoint-url``'s local server), until Ctrl-C.

It prints one link: it carries this serve's random token, which the page trades for a cookie.
Another address than loopback is refused unless ``--allow-remote`` says so, and then loudly: whoever
reaches that address with the link acts with these credentials.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from longstep_kit.cli.errors import EXIT_OK, CliError
from longstep_kit.cli.targets import add_stack_options, checkpoint_store, stack_output, steering_of, targets


def _no_edits(name: str) -> Any:
    """The UI approves and rejects; an edit (which needs the agent's tool schemas) is `longstep approve --input`."""
    raise CliError("the run UI does not edit arguments: use `longstep approve APPROVAL_ID --input JSON`")


def backend_of(args: argparse.Namespace) -> Any:
    """The UI's backend on the target stack: its views, steering and approvals, on the command's clients."""
    from longstep.humans.service import ApprovalService
    from longstep.humans.table import ApprovalTable
    from longstep_kit.ops.views.inspector import RunInspector
    from longstep_kit.ui.backend import Backend

    arn, table = targets(args)
    try:
        approvals_table = args.approvals_table or stack_output(args, "ApprovalsTableName")
    except CliError:  # a stack without the approvals table: the UI shows no approvals
        approvals_table = None
    aws = args.aws
    ddb = aws.client("dynamodb")
    inspector = RunInspector(arn, table, approvals_table, sfn=aws.client("stepfunctions"), dynamodb=ddb, lambda_client=aws.client("lambda"))
    service = None
    if approvals_table:
        service = ApprovalService(ApprovalTable(approvals_table, ddb), checkpoint_store(args, table), aws.client("stepfunctions"), _no_edits)
    return Backend(inspector, steering_of(args), service)


def cmd_ui(args: argparse.Namespace) -> int:
    from longstep_kit.ui.guard import is_loopback
    from longstep_kit.ui.server import UiServer, check_bind

    check_bind(args.host, args.allow_remote)  # before any AWS call
    backend = backend_of(args)
    server = UiServer(backend, args.host, args.port, allow_remote=args.allow_remote, log=lambda line: print(line, file=sys.stderr, flush=True))
    if not is_loopback(args.host):
        print(
            f"WARNING: the run UI listens on {args.host}, not only this machine: anyone who can reach it and has the link "
            f"acts with your AWS credentials ({backend.who})",
            file=sys.stderr,
            flush=True,
        )
    print(f"run UI: {server.url}", flush=True)
    print(f"  (the link holds this serve's token; acting as {backend.who}; Ctrl-C stops it)", flush=True)
    if args.open:
        import webbrowser

        webbrowser.open(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("run UI stopped", flush=True)
    return EXIT_OK


def register(sub: Any) -> None:
    ui = sub.add_parser(
        "ui",
        help="serve the run UI on 127.0.0.1: follow runs live, approve, send messages, pause, resume, stop. Example: longstep ui --open",
    )
    ui.add_argument("--port", type=int, default=0, help="the port to listen on (default: a free one)")
    ui.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1; another needs --allow-remote)")
    ui.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a non-loopback --host: whoever reaches it with the link acts with your AWS credentials",
    )
    ui.add_argument("--open", action="store_true", help="open the link in the default browser")
    add_stack_options(ui)
    ui.add_argument("--checkpoint-table", help="use this checkpoint table instead of the stack's")
    ui.add_argument("--approvals-table", help="use this approvals table instead of the stack's")
    ui.set_defaults(func=cmd_ui)
