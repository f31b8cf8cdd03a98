"""bench/RESULTS.md holds one section per benchmark between its markers: each benchmark rewrites its own."""

from __future__ import annotations

from pathlib import Path


def write_section(report: Path, section: str, begin: str, end: str) -> None:
    """Put ``section`` (which starts with ``begin`` and ends with ``end``) in ``report``: in place
    of the old section between those markers, else appended; other sections stay as they are."""
    text = report.read_text() if report.exists() else ""
    if begin in text and end in text:
        before, _, rest = text.partition(begin)
        _, _, after = rest.partition(end)
        text = before + section.rstrip("\n") + after
    else:
        text = (text.rstrip("\n") + "\n\n" if text.strip() else "") + section
    report.write_text(text if text.endswith("\n") else text + "\n")
