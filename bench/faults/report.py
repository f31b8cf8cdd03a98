"""The fault campaign's section of ``bench/RESULTS.md``, rendered from its summary
(``bench/results/faults_campaign.json``): the totals, each scenario's, and every run that fired
and did not give the clean run, with why when it is known."""

from __future__ import annotations

import datetime as dt
import platform
from collections import defaultdict
from typing import Any

BEGIN = "<!-- bench-faults-campaign:begin -->"
END = "<!-- bench-faults-campaign:end -->"


def _what(row: dict[str, Any]) -> str:
    for name in ("faults", "crash", "drawn"):
        if row.get(name):
            return f"{name} {' '.join(str(x) for x in row[name])}"
    return ", ".join(f"{k}={row[k]}" for k in ("random", "restart_at", "throttle", "seed", "approver_dies") if k in row) or "clean"


def render(summary: dict[str, Any]) -> str:
    """The section, markers included."""
    per: dict[str, dict[str, Any]] = defaultdict(lambda: {"runs": 0, "fired": 0, "duplicates": 0, "differ": 0})
    for row in summary["cases"]:
        shown = per[row["scenario"]]
        shown["runs"] += 1
        shown["fired"] += bool(row.get("fired"))
        shown["duplicates"] += row.get("duplicates") or 0
    for row in summary["fired_and_different"] + summary["known_failures"]:
        per[row["scenario"]]["differ"] += 1
    seconds = summary.get("seconds_per_scenario", {})
    lines = [
        BEGIN,
        "## The fault campaign: every fault kind on every shipped scenario, the fleet's entries, killed workers and parallel waits (issues 24, 27)",
        "",
        f"`make campaign` (`bench/faults/campaign.py`, `bench/faults/fleet_campaign.py`, `bench/faults/kill_campaign.py`, `bench/faults/parallel_waits.py`), {dt.date.today().isoformat()}, "
        f"Python {platform.python_version()}. Each faulted run is compared with its scenario's clean run "
        "(transcript or log, effects from the agents' own ledgers, status); duplicates are effects repeated under one key.",
        "",
        f"- **{summary['runs']} runs, {summary['fired']} fired, {summary['duplicates']} duplicates**; "
        f"{len(summary['fired_and_different'])} differ for a reason not known yet, {len(summary['known_failures'])} for a known one.",
        "",
        "| scenario | runs | fired | differ | duplicates | seconds |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name in sorted(per):
        p = per[name]
        lines.append(f"| {name} | {p['runs']} | {p['fired']} | {p['differ']} | {p['duplicates']} | {seconds.get(name, '')} |")
    moved = [r for r in summary["cases"] if r.get("timers_later_by")]
    if moved:
        lines += [
            "",
            f"{len(moved)} runs gave the clean run but for a timer that ended later (by at most the retry backoff the run "
            "waited before it: a timer ends its seconds after its turn began, and a retry's jittered backoff delays the turn; "
            "`same_agent_run` in `bench/faults/campaign.py`): "
            + "; ".join(f"{r['scenario']} {_what(r)} (+{', +'.join(f'{s:g}' for s in r['timers_later_by'])} s)" for r in moved)
            + ".",
        ]
    differ = [(r, False) for r in summary["fired_and_different"]] + [(r, True) for r in summary["known_failures"]]
    if differ:
        lines += ["", "Runs that fired and differ from the clean run:", ""]
        for row, known in differ:
            why = row.get("known") if known else (row.get("error") or row.get("cause") or "not known yet")
            lines.append(f"- {row['scenario']}, {_what(row)}: {row.get('status')}; {'known: ' if known else 'new: '}{str(why)[:300]}")
    if summary.get("notes"):
        lines += ["", "Notes:", "", *[f"- {note}" for note in summary["notes"]]]
    lines.append(END)
    return "\n".join(lines) + "\n"
