"""How the storage report names the systems and writes its numbers, and how it finds a job's entry.

Shared by the goals (``bench/storage/goals.py``) and the report's sections (``bench/storage/report.py``,
``bench/storage/method.py``), so a number is written the same way in a verdict and in a table.
"""

from __future__ import annotations

from typing import Any

SHORT = {
    "full_snapshot": "Full snapshot",
    "langgraph": "LangGraph",
    "langgraph_delta": "LangGraph + DeltaChannel",
    "longstep": "Longstep",
}


def has_bytes(entry: dict[str, Any] | None) -> bool:
    """Whether the job ran and counted its bytes (not failed, not unavailable)."""
    return bool(entry) and "bytes" in entry


def result(doc: dict[str, Any], turns: int, system: str) -> dict[str, Any] | None:
    """The entry of ``system`` at ``turns`` turns in the results document, if it was run."""
    return doc["results"].get(str(turns), {}).get(system)


def mb(n: float) -> str:
    """Bytes in MB (10^6), or GB past 10 GB."""
    return f"{n / 1e6:,.2f} MB" if n < 1e10 else f"{n / 1e9:,.1f} GB"


def count(n: int) -> str:
    """A whole number with thousands separators."""
    return f"{n:,}"


def times(ratio: float) -> str:
    """A ratio as ``12.3x`` (no decimal past 100x)."""
    return f"{ratio:,.1f}x" if ratio < 100 else f"{ratio:,.0f}x"
