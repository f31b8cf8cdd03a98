"""The loop benchmark's section of bench/RESULTS.md: each figure beside the baseline's and its target."""

from __future__ import annotations

from typing import Any

# step -> (what it is, the target on 2 idle cores in seconds or None, the figure the issue measured before)
ROWS = {
    "demo": ("fresh clone, `make demo` (package caches warm)", 120, "7 min 29 s (load 1-12)"),
    "code_edit_rerun_served": ("one line of a tool edited, the triage scenario run again on the served stack (`longstep dev`'s loop)", 5, "70-100 s"),
    "code_edit_rerun": ("the same, `longstep local run` in a new process (deploys a stack of its own)", None, "70-100 s"),
    "code_edit_rerun_no_bytecode": ("the same, Python's bytecode not kept (PYTHONDONTWRITEBYTECODE set, as on this machine)", None, "-"),
    "declaration_edit_rerun": ("a declaration edited, run again (synthesizes)", None, "70-100 s"),
    "init_demo": ("`longstep init` project, first `make demo` (kit installed)", 90, "10-18 min (load 15-28)"),
    "init_test": ("the init project's `make test`", 30, "2-4 min"),
    "test_fast": ("`make test-fast` (unit and functional)", 60, "no such target"),
    "test": ("`make test` (the whole suite)", 240, "8 min 30 s idle"),
}


def _figure(step: dict[str, Any] | None) -> str:
    if not step:
        return "not run"
    failed = "" if step["exit_code"] == 0 else f", FAILED (exit {step['exit_code']})"
    return f"{step['wall_seconds']:.1f} s wall, {step['cpu_seconds']:.1f} s CPU (load {step['load_1m']:.1f}){failed}"


def _verdict(step: dict[str, Any] | None, target: float) -> str:
    if not step:
        return "not measured"
    return "met" if step["exit_code"] == 0 and step["wall_seconds"] <= target else "not met"


def render(results: dict[str, Any], begin: str, end: str) -> str:
    this, base = results.get("this", {}), results.get("baseline", {})
    lines = [
        begin,
        "## The loop a team lives in (issue 34): `make bench-loop`",
        "",
        f"Fresh clones of this tree ({this.get('revision', '?')}) and of the baseline ({base.get('revision', 'not run')}), one after",
        "the other in one run, on the machine below; Longstep's own caches empty, the package managers' warm.",
        f"Machine: {results['machine'].get('cpu', '?')}, {results['machine'].get('nproc', '?')} cores. Results: `bench/results/loop.json`.",
        "",
        "| step | this tree | baseline, same run | ratio (wall) | target (2 idle cores) | figure the issue measured |",
        "|---|---|---|---|---|---|",
    ]
    for key, (what, target, before) in ROWS.items():
        mine, theirs = this.get(key), base.get(key)
        ratio = f"{mine['wall_seconds'] / theirs['wall_seconds']:.2f}x" if mine and theirs and theirs["wall_seconds"] else "-"
        goal = "-" if target is None else f"{target} s: " + _verdict(mine, target)
        lines.append(f"| {what} | {_figure(mine)} | {_figure(theirs)} | {ratio} | {goal} | {before} |")
    if "cold" in results:
        lines += ["", f"Every cache empty (uv, pip, npm, Longstep's), this tree's `make demo`: {_figure(results['cold'].get('demo'))}."]
    lines += [
        "",
        "The bytecode rows: this tree's `make demo` keeps Python's bytecode where the rerun then finds it; the baseline's",
        "Makefile kept none, so its first rerun with the cache set compiles and writes it (a one-time cost in its first row).",
        "",
        "Loads above 2 on 2 cores mean the figure was taken on a busy machine: compare the ratio, measured side by side.",
        end,
    ]
    return "\n".join(lines) + "\n"
