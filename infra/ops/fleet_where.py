"""The ``--where`` expression of ``longstep runs`` and the bulk operations: grammar and matching.

Grammar (keywords in any case)::

    where   := clause ( AND clause )*
    clause  := FIELD OP VALUE | FIELD IN ( VALUE [, VALUE]* )
    OP      := = | != | < | <= | > | >=
    VALUE   := a word of letters, digits and _ . : @ + = / - $   |  'quoted'  |  "quoted"

Fields: ``agent``, ``status``, ``tenant``, ``tag`` (the run has this tag), ``code_version``
(a prefix of at least 6 characters matches, as ``show`` prints it), ``error`` (the error name
that failed or escalated the run), ``parent`` (the parent run's id), ``run_id``, ``age``
(since the run was created: ``30m``, ``2h``, ``3d``), ``tokens`` (input plus output) and
``cost`` (dollars, from the tokens and the price table ``show --cost`` uses). Only ``age``,
``tokens`` and ``cost`` compare with ``<``/``>``. Example::

    status=failed AND tenant in (acme, globex) AND code_version=3f2a9c AND age<1d

There is no OR across fields: a selection that needs one is two queries (each reads one
partition of the runs index, ``longstep_kit.ops.fleet_query`` says which).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from longstep.errors import LongstepError
from longstep.run_status import STATUSES

TEXT_FIELDS = ("agent", "status", "tenant", "tag", "code_version", "error", "parent", "run_id")
NUMBER_FIELDS = ("age", "tokens", "cost")
FIELDS = TEXT_FIELDS + NUMBER_FIELDS
OPERATORS = ("=", "!=", "<", "<=", ">", ">=", "in")
# A selectable code version is at least this long (``show`` prints 12 characters).
MIN_CODE_VERSION_PREFIX = 6

_TOKEN = re.compile(r"\s*(?:(?P<op><=|>=|!=|=|<|>)|(?P<paren>[(),])|'(?P<sq>[^']*)'|\"(?P<dq>[^\"]*)\"|(?P<word>[A-Za-z0-9_.:@+/$-]+))")


class WhereError(LongstepError):
    """A ``--where`` expression that does not parse, or names an unknown field or value."""


@dataclass(frozen=True)
class Clause:
    """One ``FIELD OP VALUE`` (``in``: ``values`` holds the list)."""

    field: str
    op: str
    values: tuple[Any, ...]

    @property
    def value(self) -> Any:
        return self.values[0]


def parse_where(text: str) -> list[Clause]:
    """The clauses of a ``--where`` expression (all must hold).

    Raises:
        WhereError: one line naming the bad field, operator or value.
    """
    tokens = _tokenize(text)
    if not tokens:
        raise WhereError("where: the expression is empty (e.g. status=failed AND tenant=acme)")
    clauses = []
    pos = 0
    while True:
        clause, pos = _clause(tokens, pos)
        clauses.append(clause)
        if pos == len(tokens):
            return clauses
        kind, word = tokens[pos]
        if kind != "word" or word.lower() != "and":
            raise WhereError(f"where: expected AND after {clause.field}, got {word!r} (there is no OR: run two queries)")
        pos += 1


def _tokenize(text: str) -> list[tuple[str, str]]:
    out = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        match = _TOKEN.match(text, pos)
        if not match:
            raise WhereError(f"where: unexpected {text[pos:].strip()[:20]!r} at character {pos + 1}")
        kind = match.lastgroup or "word"
        word = match.group(kind)
        out.append(("word" if kind in ("sq", "dq", "word") else kind, word))
        pos = match.end()
    return out


def _clause(tokens: list[tuple[str, str]], pos: int) -> tuple[Clause, int]:
    kind, name = tokens[pos]
    field = name.lower()
    if kind != "word" or field not in FIELDS:
        raise WhereError(f"where: unknown field {name!r} (fields: {', '.join(FIELDS)})")
    if pos + 1 >= len(tokens):
        raise WhereError(f"where: {field}: expected an operator ({', '.join(OPERATORS)}) and a value")
    kind, op = tokens[pos + 1]
    op = op.lower()
    if op == "in":
        values, pos = _list(tokens, pos + 2, field)
        return Clause(field, "in", tuple(_value(field, "=", v) for v in values)), pos
    if kind != "op":
        raise WhereError(f"where: {field}: expected an operator ({', '.join(OPERATORS)}), got {op!r}")
    if op not in ("=", "!=") and field not in NUMBER_FIELDS:
        raise WhereError(f"where: {field}: only = != and in compare it (< and > are for {', '.join(NUMBER_FIELDS)})")
    if pos + 2 >= len(tokens) or tokens[pos + 2][0] != "word":
        raise WhereError(f"where: {field}: expected a value after {op}")
    return Clause(field, op, (_value(field, op, tokens[pos + 2][1]),)), pos + 3


def _list(tokens: list[tuple[str, str]], pos: int, field: str) -> tuple[list[str], int]:
    if pos >= len(tokens) or tokens[pos] != ("paren", "("):
        raise WhereError(f"where: {field}: expected ( after in")
    values = []
    pos += 1
    while pos < len(tokens) and tokens[pos][0] == "word":
        values.append(tokens[pos][1])
        pos += 1
        if pos < len(tokens) and tokens[pos] == ("paren", ","):
            pos += 1
    if pos >= len(tokens) or tokens[pos] != ("paren", ")") or not values:
        raise WhereError(f"where: {field}: expected a list of values like (a, b) after in")
    return values, pos + 1


def _value(field: str, op: str, raw: str) -> Any:
    if field == "status":
        value = raw.lower()
        if value not in STATUSES:
            raise WhereError(f"where: status: {raw!r} is not one of {', '.join(STATUSES)}")
        return value
    if field == "code_version" and len(raw) < MIN_CODE_VERSION_PREFIX:
        raise WhereError(f"where: code_version: give at least {MIN_CODE_VERSION_PREFIX} characters, got {raw!r}")
    if field == "age":
        from longstep_kit.ops.views import InspectError
        from longstep_kit.ops.views.status import parse_age

        try:
            return parse_age(raw)
        except InspectError:
            raise WhereError(f"where: age: {raw!r} is not an age like 30m, 2h, 3d or 1h30m") from None
    if field in ("tokens", "cost"):
        try:
            number = float(raw.lstrip("$"))
        except ValueError:
            raise WhereError(f"where: {field}: {raw!r} is not a number") from None
        if number < 0:
            raise WhereError(f"where: {field}: {raw!r} is negative")
        return number
    return raw


def matches(clauses: list[Clause], run: dict[str, Any], now: float, cost_of: Callable[[dict[str, Any]], float]) -> bool:
    """Whether a run's index record (plain values, tags decoded) satisfies every clause."""
    return all(_holds(c, run, now, cost_of) for c in clauses)


def _holds(clause: Clause, run: dict[str, Any], now: float, cost_of: Callable[[dict[str, Any]], float]) -> bool:
    if clause.field in NUMBER_FIELDS:
        actual = _number(clause.field, run, now, cost_of)
        if clause.op == "in":
            return actual in clause.values
        return _compare(actual, clause.op, float(clause.value))
    if clause.field == "tag":
        tags = set(run.get("tags") or [])
        hit = any(v in tags for v in clause.values)
    elif clause.field == "code_version":
        version = str(run.get("code_version") or "")
        hit = any(version.startswith(v) for v in clause.values)
    else:
        hit = str(run.get(clause.field) or "") in clause.values
    return not hit if clause.op == "!=" else hit


def _number(field: str, run: dict[str, Any], now: float, cost_of: Callable[[dict[str, Any]], float]) -> float:
    if field == "age":
        return now - float(run.get("created_at") or now)
    if field == "tokens":
        return float(run.get("input_tokens") or 0) + float(run.get("output_tokens") or 0)
    return cost_of(run)


def _compare(actual: float, op: str, expected: float) -> bool:
    return {
        "=": actual == expected,
        "!=": actual != expected,
        "<": actual < expected,
        "<=": actual <= expected,
        ">": actual > expected,
        ">=": actual >= expected,
    }[op]
