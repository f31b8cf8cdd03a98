"""``--output text`` and ``--output table`` of data, as the AWS CLI writes them
(https://docs.aws.amazon.com/cli/latest/userguide/cli-usage-output-format.html).

``text``: tab-separated values, one line per object (its scalar values in the order of their
sorted keys; a nested list or object on lines of its own, prefixed with its key in capitals), a
list of scalars on one line, ``None`` for null. ``table``: a boxed grid titled with the command,
one row per object, with times (epoch seconds under ``*_at``, ``since``, ``started``...) in UTC
and ``age_seconds`` as an age, not floats.
"""

from __future__ import annotations

import json
from typing import Any

from longstep_kit.cli.formatting import age, when

# Keys whose numbers are epoch seconds (the views' and the records' times); shown as UTC times in tables.
TIME_KEYS = ("since", "started", "stopped", "at", "startDate", "stopDate")
MIN_EPOCH = 100_000_000.0  # 1973: a smaller number under a time key is not a time
MAX_CELL = 60


# -- text ---------------------------------------------------------------------------------------


def text_lines(data: Any) -> list[str]:
    """``data`` as the AWS CLI's text output (its ``awscli/text.py``)."""
    out: list[str] = []
    _text(data, out, None, None)
    return out


def _scalar(value: Any) -> str:
    return str(value)  # as the AWS CLI: None, True, 1.5


def _text(item: Any, out: list[str], identifier: str | None, scalar_keys: list[str] | None) -> None:
    if isinstance(item, dict):
        _text_dict(item, out, identifier, scalar_keys)
    elif isinstance(item, list):
        _text_list(item, out, identifier)
    else:
        out.append(_scalar(item))


def _text_list(items: list[Any], out: list[str], identifier: str | None) -> None:
    if not items:
        return
    if any(isinstance(i, dict) for i in items):
        keys = sorted({k for i in items if isinstance(i, dict) for k, v in i.items() if not isinstance(v, (dict, list))})
        for i in items:
            _text(i, out, identifier, keys)
    elif any(isinstance(i, list) for i in items):
        scalars = [i for i in items if not isinstance(i, list)]
        if scalars:
            _text_scalars(scalars, out, identifier)
        for i in items:
            if isinstance(i, list):
                _text(i, out, identifier, None)
    else:
        _text_scalars(items, out, identifier)


def _text_scalars(items: list[Any], out: list[str], identifier: str | None) -> None:
    if identifier is not None:
        out.extend(f"{identifier.upper()}\t{_scalar(i)}" for i in items)
    else:
        out.append("\t".join(_scalar(i) for i in items))


def _text_dict(item: dict[str, Any], out: list[str], identifier: str | None, scalar_keys: list[str] | None) -> None:
    if scalar_keys is None:
        scalars = [_scalar(v) for k, v in sorted(item.items()) if not isinstance(v, (dict, list))]
        nested = [(k, v) for k, v in sorted(item.items()) if isinstance(v, (dict, list))]
    else:
        scalars = [_scalar(item.get(k, "")) for k in scalar_keys]
        nested = [(k, item[k]) for k in sorted(set(item) - set(scalar_keys))]
    if scalars:
        out.append("\t".join(([identifier.upper()] if identifier is not None else []) + scalars))
    for key, value in nested:
        _text(value, out, key, None)


# -- table --------------------------------------------------------------------------------------


def table_lines(data: Any, title: str = "") -> list[str]:
    """``data`` as a boxed table: a list of objects as rows (the keys of all of them, in order),
    an object as key and value rows, a list of scalars as one column."""
    if isinstance(data, dict):
        header, rows = ["key", "value"], [[str(k), cell(k, v)] for k, v in data.items()]
    elif isinstance(data, list) and data and all(isinstance(d, dict) for d in data):
        header = list(dict.fromkeys(k for d in data for k in d))
        rows = [[cell(k, d.get(k)) for k in header] for d in data]
    elif isinstance(data, list):
        header, rows = [], [[cell("", d)] for d in data]
    else:
        header, rows = [], [[cell("", data)]]
    return boxed(title, header, rows)


def boxed(title: str, header: list[str], rows: list[list[str]]) -> list[str]:
    """The AWS CLI's table: a title line, then each row between ``|``, rules of ``+`` and ``-``."""
    columns = len(header) or max((len(r) for r in rows), default=1)
    widths = [max([len(header[i]) if header else 0] + [len(r[i]) for r in rows]) + 4 for i in range(columns)]
    inner = sum(widths) + columns - 1
    if title and len(title) + 4 > inner:  # a long title widens the last column
        widths[-1] += len(title) + 4 - inner
        inner = len(title) + 4
    rule = "+" + "+".join("-" * w for w in widths) + "+"
    lines = []
    if title:
        lines += ["-" * (inner + 2), "|" + title.center(inner) + "|"]
    lines.append(rule)
    if header:
        lines += ["|" + "|".join(h.center(w) for h, w in zip(header, widths)) + "|", rule]
    lines += ["|" + "|".join(f"  {c}".ljust(w) for c, w in zip(r, widths)) + "|" for r in rows]
    if rows:
        lines.append(rule)
    return lines


def cell(key: str, value: Any) -> str:
    """A value as a table shows it: times in UTC, ages, nested values as short JSON, null empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (int, float)):
        if key == "age_seconds":
            return age(value)
        if (key in TIME_KEYS or key.endswith("_at")) and value >= MIN_EPOCH:
            return when(value)
    if isinstance(value, (dict, list)):
        text = json.dumps(value, default=str)
        return text if len(text) <= MAX_CELL else text[: MAX_CELL - 3] + "..."
    return str(value)
