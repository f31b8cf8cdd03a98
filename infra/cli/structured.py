"""Structured output as the AWS CLI gives it: ``--query`` (a JMESPath expression, https://jmespath.org/specification.html)
applied to what ``--output json`` would print, ``--output table`` and ``text`` (``cli/aws_output.py``), and ``--max-items`` /
``--starting-token`` on the list commands (the token is opaque: where the next page starts)."""

from __future__ import annotations

import argparse
import base64
import json
import sys
from typing import Any

from longstep_kit.cli.errors import CliError


def wants_data(args: argparse.Namespace) -> bool:
    """The command prints data (``--output json`` or ``table``, or a ``--query``), not its text view."""
    return getattr(args, "output", "text") in ("json", "table") or bool(getattr(args, "query", None))


def print_data(args: argparse.Namespace, data: Any) -> None:
    """Print ``data`` as ``--output`` says, after ``--query``: ``json``; ``table`` (boxed, human
    times); ``text`` given outright, tab-separated values (``cli/aws_output.py``). A ``--query``
    without ``--output`` prints JSON, the AWS CLI's default output."""
    query = getattr(args, "query", None)
    if query:
        import jmespath
        from jmespath.exceptions import JMESPathError

        try:
            data = jmespath.search(query, json.loads(json.dumps(data, default=str)))
        except JMESPathError as exc:
            raise CliError(f"--query {query!r}: {str(exc).splitlines()[0]}") from None
    output = getattr(args, "output", "text")
    if output in ("table", "text") and (output == "table" or getattr(args, "output_given", False)):
        from longstep_kit.cli.aws_output import table_lines, text_lines

        lines = table_lines(data, str(getattr(args, "command", "") or "")) if output == "table" else text_lines(data)
        for line in lines:
            print(line)
        return
    print(json.dumps(data, indent=2, default=str))


def add_paging(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-items", type=int, metavar="N", help="print at most N items; the next page's --starting-token goes to stderr")
    p.add_argument("--starting-token", metavar="TOKEN", help="where to start: the token a --max-items page printed")


def page(args: argparse.Namespace, items: list[Any]) -> list[Any]:
    """The page of ``items`` that ``--max-items`` and ``--starting-token`` ask for (all of them by default).

    Raises:
        CliError: a bad ``--max-items`` or token.
    """
    start = 0
    token = getattr(args, "starting_token", None)
    if token:
        try:
            start = int(json.loads(base64.urlsafe_b64decode(token.encode()))["offset"])
        except (ValueError, KeyError, TypeError):
            raise CliError(f"--starting-token {token!r}: not a token this command printed") from None
    limit = getattr(args, "max_items", None)
    if limit is not None and limit < 1:
        raise CliError(f"--max-items: must be at least 1, got {limit}")
    end = len(items) if limit is None else start + limit
    if end < len(items):
        next_token = base64.urlsafe_b64encode(json.dumps({"offset": end}).encode()).decode()
        print(f"more: --starting-token {next_token}", file=sys.stderr)
    return items[start:end]
