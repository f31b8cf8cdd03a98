"""A turn's cost, before and after: the same scenario run by two versions of Longstep, side by side
in one session (issue 28's targets).

Each version runs ``bench/turns/probe.py`` in a fresh process: ``--baseline REV`` is the git
revision to compare with (its tree taken with ``git archive``, its packages put first on
``sys.path``: the same mapping as ``setup.py``'s), the other is this working tree. The scenario is
bench/speed's read loop: N turns, each one model call and one read tool call, then a summary.
Both versions run it with the local stack's AWS enforcement on. Writes
``bench/results/turns.json`` and the turns section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.sections import write_section  # noqa: E402
from bench.speed.run import scenario_document  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "turns.json"
REPORT = ROOT / "bench" / "RESULTS.md"
BEGIN, END = "<!-- bench-turns:begin -->", "<!-- bench-turns:end -->"
PACKAGE_DIRS = {"longstep": "layers/runtime", "longstep_functions": "functions", "longstep_kit": "infra", "agents": "agents"}
GOALS = {"dynamodb_requests_per_turn": 7.0, "transitions_per_turn": 3.0}
# The run's own states (BindAgent, Init, ContinueAsNew, HandedOver, Finish, Done: about 25 over 200
# turns and 4 executions), spread over its turns.
RUN_STATES_ALLOWANCE = 0.2


def checkout(rev: str, into: Path) -> Path:
    """The tree of ``rev`` in ``into``, with an overlay directory mapping its packages, and this
    working tree's node_modules and layer cache (built from the same lock files)."""
    tree = into / "tree"
    tree.mkdir()
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    overlay = into / "overlay"
    overlay.mkdir()
    for package, folder in PACKAGE_DIRS.items():
        (overlay / package).symlink_to(tree / folder)
    for shared in ("node_modules", ".longstep"):
        if (ROOT / shared).exists():
            (tree / shared).symlink_to(ROOT / shared)
    return tree


def probe(label: str, project: Path, overlay: Path | None, scenario: Path, out: Path) -> dict[str, Any]:
    env = {**os.environ, "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1"}
    if overlay is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(overlay), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "turns" / "probe.py"), str(scenario), str(out)],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{label}: exit {done.returncode}: {done.stderr[-3000:]}")
    return json.loads(out.read_text())


def per_turn(result: dict[str, Any], turns: int) -> dict[str, Any]:
    requests = result["requests"]

    def total(prefix: str) -> float:
        return sum(n for op, n in requests.items() if op.startswith(prefix)) / turns

    turn = result.get("turn_requests") or {}
    return {
        "one_call_turn_median": float(turn.get("one_call_turn_median") or 0),
        "one_call_turn_max": float(turn.get("one_call_turn_max") or 0),
        "runtime_requests": total("steps:"),
        "steps_by_operation": {op.split(":", 1)[1]: n / turns for op, n in sorted(requests.items()) if op.startswith("steps:")},
        "stream_requests": total("stream:"),
        "tool_requests": total("tools:"),
        "dynamodb_requests": total("dynamodb:"),
        "s3_requests": total("s3:"),
        "state_transitions": result["state_transitions"] / turns,
        "lambda_invocations": result["lambda_invocations"] / turns,
        "cpu_ms": 1000 * result["cpu_seconds"] / turns,
        "stored_bytes": result["storage"]["dynamodb_bytes"] / turns,
        "stored_items": result["storage"]["items"] / turns,
    }


def render(doc: dict[str, Any]) -> str:
    turns = doc["turns"]
    before, after = doc["versions"]["before"], doc["versions"]["after"]
    b, a = before["per_turn"], after["per_turn"]

    def row(label: str, key: str, fmt: str = "{:.2f}") -> str:
        ratio = f"{a[key] / b[key]:.2f}x" if b[key] else "-"
        return f"| {label} | {fmt.format(b[key])} | {fmt.format(a[key])} | {ratio} |"

    ops = sorted(set(b["steps_by_operation"]) | set(a["steps_by_operation"]))
    op_rows = [f"| &nbsp;&nbsp;{op} | {b['steps_by_operation'].get(op, 0):.2f} | {a['steps_by_operation'].get(op, 0):.2f} | |" for op in ops]
    same = before["result"]["transcript_sha256"] == after["result"]["transcript_sha256"]
    goal = GOALS["dynamodb_requests_per_turn"]
    lines = [
        BEGIN,
        "## A turn's cost, before and after (issue 28)",
        "",
        "Generated by `bench/turns/` (do not edit by hand between the markers). Regenerate with `make bench-turns` "
        f"(`.venv/bin/python -m bench.turns --baseline {doc['baseline']}`).",
        "",
        f"The same {turns}-turn scenario (each turn one model call and one read tool call, then a summary: bench/speed's read loop) "
        "run by two versions of Longstep in fresh processes, one after the other in one session: **before** is commit "
        f"`{doc['baseline']}`, **after** the working tree at `{doc['head']}`, each on the local stack with AWS enforcement on, "
        "after one warm-up run. Requests are the runtime's own (the handlers' boto3 clients), by what they are for: the "
        "checkpoint table's step, run and context records (and the idempotency table's step locks, before); the run's event stream (its `event#` records); the tools' own "
        "tables. CPU is the whole process's over the run phase (engine and handlers).",
        "",
        f"| per turn ({turns} turns) | before | after | after / before |",
        "|---|---:|---:|---:|",
        row("DynamoDB requests of the runtime in a turn with one tool call (its ModelTurn and CallTool), median", "one_call_turn_median", "{:.0f}"),
        row("the same, the costliest such turn (one that writes a context snapshot)", "one_call_turn_max", "{:.0f}"),
        row("DynamoDB requests of the runtime per turn, the run's own included (Init, hand-overs, Finish)", "runtime_requests"),
        *op_rows,
        row("DynamoDB requests of the event stream", "stream_requests"),
        row("DynamoDB requests of the tools (the agent's tables)", "tool_requests"),
        row("DynamoDB requests, all", "dynamodb_requests"),
        row("S3 requests", "s3_requests"),
        row("state transitions", "state_transitions"),
        row("Lambda invocations", "lambda_invocations"),
        row("local CPU of the run phase (ms)", "cpu_ms", "{:.1f}"),
        row("DynamoDB bytes stored (both tables)", "stored_bytes", "{:,.0f}"),
        row("items stored (DynamoDB and S3)", "stored_items"),
        "",
        f"Transcript hashes: before `{before['result']['transcript_sha256'][:12]}`, after `{after['result']['transcript_sha256'][:12]}` "
        f"({'the same' if same else 'DIFFERENT'}).",
        "",
        "| goal | measured | verdict |",
        "|---|---|---|",
        f"| at most {goal:.0f} DynamoDB requests of the runtime in a turn with one tool call (steps, run and context records; "
        f"the event stream counted apart) | median {a['one_call_turn_median']:.0f} (max {a['one_call_turn_max']:.0f}); "
        f"{a['runtime_requests']:.2f} per turn with the run's own | **{'met' if a['one_call_turn_median'] <= goal else 'not met'}** |",
        f"| at most {GOALS['transitions_per_turn']:.0f} state transitions per turn with one tool call | {a['state_transitions']:.2f} per turn "
        f"| **{'met' if a['state_transitions'] <= GOALS['transitions_per_turn'] + RUN_STATES_ALLOWANCE else 'not met'}** (a turn enters "
        "ModelTurn, Route and CallOneTool; the figure includes the run's own BindAgent, Init, hand-overs and Finish, "
        f"allowed {RUN_STATES_ALLOWANCE} a turn) |",
        "",
        f"Machine: {doc['machine']}. Wall seconds of the two run phases: before {before['result']['wall_seconds']:.1f}, after "
        f"{after['result']['wall_seconds']:.1f} (a shared 2-core machine: CPU is the figure to compare).",
        END,
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.turns", description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="the git revision to compare with")
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args(argv)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    baseline = subprocess.run(["git", "rev-parse", "--short", args.baseline], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        scenario = Path(tmp) / "scenario.json"
        scenario.write_text(json.dumps(scenario_document(args.turns)))
        base_tree = checkout(baseline, Path(tmp))
        versions = {}
        for label, project, overlay in (("before", base_tree, Path(tmp) / "overlay"), ("after", ROOT, None)):
            result = probe(label, project, overlay, scenario, Path(tmp) / f"{label}.json")
            versions[label] = {"result": result, "per_turn": per_turn(result, args.turns)}
            print(f"{label}: {json.dumps(versions[label]['per_turn'])}", flush=True)
    doc = {
        "turns": args.turns,
        "baseline": baseline,
        "head": head,
        "machine": f"nproc {os.cpu_count()}, Python {platform.python_version()}, {platform.platform()}",
        "versions": versions,
    }
    RESULTS.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    write_section(REPORT, render(doc), BEGIN, END)
    return 0
