"""JSON from outside the stack, parsed with a depth cap: every entry point that reads JSON a person
or another system wrote (the approval API's bodies, the decision page's edited arguments,
signals, EventBridge events, scenarios, the CLI's ``--input`` files) goes through here.

Python's ``json`` parses nested arrays and objects by recursion: a body nested a few thousand
levels deep (a few kilobytes of ``[``) raises ``RecursionError``, which no entry point expects (a
502 and a traceback in the approval function's log), and a value nested a few hundred levels
deep parses but breaks what recurses over it later (validation, serialization). The depth is
checked before parsing, without recursion, and a deeper document is refused as bad input that
names its field.

The cap is DynamoDB's: an attribute value nests at most 32 levels
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html#limits-attributes),
so a deeper value could not be stored as a document anyway, and no input of the kit nests near it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from longstep.errors import BadRequestError

MAX_JSON_DEPTH = 32

# A JSON string (escapes included): its brackets are text, not structure.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


def text_depth(text: str) -> int:
    """How deeply the arrays and objects of JSON ``text`` nest (0 for a scalar), counted without
    parsing. Malformed text gets a count too; the parser refuses it afterwards."""
    depth = deepest = 0
    for match in _BRACKET.finditer(_STRING.sub('""', text)):
        if match.group() in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def value_depth(value: Any) -> int:
    """How deeply the lists and dicts of an already parsed ``value`` nest, walked without recursion."""
    deepest = 0
    pending = [(value, 1)]
    while pending:
        current, level = pending.pop()
        if isinstance(current, dict):
            children = current.values()
        elif isinstance(current, (list, tuple)):
            children = current
        else:
            continue
        deepest = max(deepest, level)
        if deepest > MAX_JSON_DEPTH:  # deep enough to refuse: no need to walk the rest
            return deepest
        pending.extend((child, level + 1) for child in children)
    return deepest


def check_depth(value: Any, field: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Return ``value`` (already parsed: a Lambda event) if it nests at most ``max_depth`` levels.

    Raises:
        BadRequestError: it nests deeper; names ``field``.
    """
    if value_depth(value) > max_depth:
        raise BadRequestError(field, f"nests deeper than {max_depth} levels")
    return value


def parse_json(text: str | bytes, field: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse JSON ``text`` that came from outside.

    Args:
        text: the document (bytes are read as UTF-8).
        field: what it is, for the error (``body``, ``arguments``, ``--input``, a file name).
        max_depth: the deepest nesting accepted.

    Returns:
        The parsed value.

    Raises:
        BadRequestError: the text is not UTF-8, not JSON, or nests deeper than ``max_depth``
            levels; names ``field``.
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise BadRequestError(field, "is not UTF-8 text") from None
    if text_depth(text) > max_depth:
        raise BadRequestError(field, f"nests deeper than {max_depth} levels")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadRequestError(field, f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
