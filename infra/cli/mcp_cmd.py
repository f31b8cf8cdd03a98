"""``longstep mcp``: the target stack's runs offered to MCP clients (``longstep_kit.mcp_server``),
over stdio (the default: an MCP client starts the command) or streamable HTTP on 127.0.0.1
(``--http``), with the operator's own AWS credentials (or ``--endpoint-url``'s local server).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from longstep_kit.cli.errors import EXIT_OK, CliError
from longstep_kit.cli.targets import add_stack_options, stack_output, targets


def client_of(args: argparse.Namespace) -> Any:
    """The ``Client`` of the target stack, on the command's AWS clients."""
    from longstep_kit.client import Client

    arn, table = targets(args)
    try:
        approvals = args.approvals_table or stack_output(args, "ApprovalsTableName")
    except CliError:  # a stack without the approvals table: no approval tools answer
        approvals = None
    aws = args.aws
    return Client(aws.client("stepfunctions"), aws.client("dynamodb"), arn, table, approvals, who="mcp")


def cmd_mcp(args: argparse.Namespace) -> int:
    from longstep_kit.mcp_server import build_server, http_server

    server = build_server(client_of(args))
    if not args.http:
        server.run("stdio")  # stdout is the protocol's: nothing else is printed there
        return EXIT_OK
    http, url = http_server(server, args.port)
    print(f"longstep mcp: {url} (streamable HTTP on this machine only; Ctrl-C stops it)", file=sys.stderr, flush=True)
    try:
        http.run()
    except KeyboardInterrupt:
        pass
    return EXIT_OK


def register(sub: Any) -> None:
    mcp = sub.add_parser(
        "mcp",
        help="offer the stack's runs to MCP clients (start, status, events, approvals, send, stop). Example: longstep mcp --http",
    )
    mcp.add_argument("--http", action="store_true", help="serve streamable HTTP on 127.0.0.1 instead of stdio")
    mcp.add_argument("--port", type=int, default=0, help="with --http: the port (default: a free one)")
    add_stack_options(mcp)
    mcp.add_argument("--checkpoint-table", help="use this checkpoint table instead of the stack's")
    mcp.add_argument("--approvals-table", help="use this approvals table instead of the stack's")
    mcp.set_defaults(func=cmd_mcp)
