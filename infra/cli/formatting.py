"""How the view commands write values: UTC times, ages, durations, byte sizes, dollars, counts,
and plain-text tables. Pure functions of their arguments: no clients, no clock."""

from __future__ import annotations

import datetime as dt


def when(epoch: float | None) -> str:
    """``2026-11-30 12:05:19Z`` (UTC), or ``-``."""
    if not epoch:
        return "-"
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def age(seconds: float | None) -> str:
    """``45s``, ``12m 5s``, ``3h 20m``, ``2d 4h``."""
    if seconds is None:
        return "-"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60}s"
    if s < 86_400:
        return f"{s // 3600}h {s % 3600 // 60}m"
    return f"{s // 86_400}d {s % 86_400 // 3600}h"


def duration(seconds: float | None) -> str:
    """``87 ms``, ``1.42 s``, or an age for long waits."""
    if seconds is None:
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.2f} s"
    return age(seconds)


def size(n: int) -> str:
    """``563 B``, ``12.3 KB``, ``1.4 MB``."""
    if n < 1024:
        return f"{n} B"
    if n < 1024**2:
        return f"{n / 1024:.1f} KB"
    return f"{n / 1024**2:.1f} MB"


def dollars(x: float) -> str:
    """Dollars with enough digits to see sub-cent amounts: ``$0.0304``, ``$0.00000460``."""
    if x == 0:
        return "$0"
    if x >= 1:
        return f"${x:,.2f}"
    digits = max(4, 3 - int(f"{x:e}".split("e")[1]))
    return f"${x:.{digits}f}"


def count(n: int, one: str, many: str | None = None) -> str:
    """``1 retry``, ``3 retries``: ``many`` defaults to ``one`` plus an s."""
    return f"{n} {one if n == 1 else many or one + 's'}"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """The lines of a table: columns as wide as their widest cell, two spaces apart."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    fmt = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return [fmt(header), *(fmt(r) for r in rows)]
