"""Structured output as the AWS CLI gives it: ``--query`` (a JMESPath expression, https://jmespath.org/specification.html)
applied to what ``--output json`` would print, ``--output table``, and ``--max-items`` /
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
    """Print ``data`` as ``--output`` says, after ``--query``."""
    query = getattr(args, "query", None)
    if query:
        import jmespath
        from jmespath.exceptions import JMESPathError

        try:
            data = jmespath.search(query, json.loads(json.dumps(data, default=str)))
        except JMESPathError as exc:
            raise CliError(f"--query {query!r}: {str(exc).splitlines()[0]}") from None
    if getattr(args, "output", "text") == "table":
        for line in table_lines(data):
            print(line)
        return
    print(json.dumps(data, indent=2, default=str))


def table_lines(data: Any) -> list[str]:
    """A list of objects as columns (the keys of the first ones), an object as KEY VALUE rows, else the values."""
    if isinstance(data, dict):
        rows = [[str(k), _cell(v)] for k, v in data.items()]
        header = ["KEY", "VALUE"]
    elif isinstance(data, list) and data and all(isinstance(d, dict) for d in data):
        header = list(dict.fromkeys(k for d in data for k in d))
        rows = [[_cell(d.get(k)) for k in header] for d in data]
        header = [h.upper() for h in header]
    elif isinstance(data, list):
        return [_cell(d) for d in data]
    else:
        return [_cell(data)]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header, *rows]]


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        text = json.dumps(value, default=str)
        return text if len(text) <= 60 else text[:57] + "..."
    return str(value)


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
