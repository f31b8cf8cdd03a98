"""A turn's cost, before and after: the same scenario run by two versions of Longstep, side by side
in one session (issue 28's targets).

Each version runs ``bench/turns/probe.py`` in a fresh process: ``--baseline REV`` is the git
revision to compare with (its tree taken with ``git archive``, its packages put first on
``sys.path``: the same mapping as ``setup.py``'s), the others are this working tree, as shipped and
with the triage agent running its read tools inside ModelTurn (``agents.triage_inline``, named in
the stack's context). The scenario is bench/speed's read loop: N turns, each one model call and
one read tool call, then a summary. Every version runs it with the local stack's AWS enforcement
on. Writes
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
GOALS = {"dynamodb_requests_per_turn": 7.0, "transitions_per_turn": 3.0, "price_ratio": 0.5}
PRICES = ROOT / "infra" / "prices.json"
MODEL_WAIT_SECONDS = 5
# The versions measured: the baseline, this tree as shipped, and this tree with the triage agent
# running its read tools inside ModelTurn (the stack's context names that agent).
INLINE = "inline"
LABELS = ("before", "after", INLINE)
HEADINGS = {"before": "before", "after": "after", INLINE: "after, reads inline"}
INLINE_CONTEXT = {"longstep": {"agents": {"triage": "agents.triage_inline:build"}}}
# The run's own states (BindAgent, Init, ContinueAsNew, HandedOver, Finish, Done: about 25 over 200
# turns and 4 executions), spread over its turns.
RUN_STATES_ALLOWANCE = 0.2
WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}


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


def probe(label: str, project: Path, overlay: Path | None, scenario: Path, out: Path, context: dict[str, Any] | None = None) -> dict[str, Any]:
    env = {**os.environ, "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1"}
    if overlay is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(overlay), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "turns" / "probe.py"), str(scenario), str(out), *([json.dumps(context)] if context else [])],
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
        "dynamodb_writes": sum(n for op, n in requests.items() if op.startswith("dynamodb:") and op.split(":")[1] in WRITES) / turns,
        "dynamodb_reads": sum(n for op, n in requests.items() if op.startswith("dynamodb:") and op.split(":")[1] not in WRITES) / turns,
        "s3_requests": total("s3:"),
        "state_transitions": result["state_transitions"] / turns,
        "lambda_invocations": result["lambda_invocations"] / turns,
        "cpu_ms": 1000 * result["cpu_seconds"] / turns,
        "stored_bytes": result["storage"]["dynamodb_bytes"] / turns,
        "stored_items": result["storage"]["items"] / turns,
    }


def price(t: dict[str, Any], model_wait_seconds: float = 0.0) -> float:
    """Dollars per 1,000 turns at ``infra/prices.json``'s list prices, model tokens aside: the state
    transitions, the Lambda requests, every DynamoDB request at one request unit (docs/cost.md), and
    ModelTurn's Lambda waiting ``model_wait_seconds`` for the model each turn."""
    from longstep_kit.ops.views.cost import load_prices

    prices = load_prices(PRICES.read_text())
    memory_gb = json.loads((ROOT / "cdk.json").read_text())["context"]["longstep"]["lambda_memory_mb"] / 1024
    per_turn = (
        t["state_transitions"] * prices.step_functions.per_1000_state_transitions / 1000
        + t["lambda_invocations"] * prices.lambda_.per_million_requests / 1e6
        + t["dynamodb_writes"] * prices.dynamodb.per_million_write_request_units / 1e6
        + t["dynamodb_reads"] * prices.dynamodb.per_million_read_request_units / 1e6
        + model_wait_seconds * memory_gb * prices.lambda_.per_gb_second
    )
    return 1000 * per_turn


def render(doc: dict[str, Any]) -> str:
    turns = doc["turns"]
    versions = doc["versions"]
    labels = [label for label in LABELS if label in versions]
    t = {
        label: {
            **versions[label]["per_turn"],
            "price": price(versions[label]["per_turn"]),
            "price_wait": price(versions[label]["per_turn"], MODEL_WAIT_SECONDS),
        }
        for label in labels
    }
    b, a = t["before"], t[labels[-1]]

    def row(label: str, key: str, fmt: str = "{:.2f}") -> str:
        ratio = f"{a[key] / b[key]:.2f}x" if b[key] else "-"
        return f"| {label} | " + " | ".join(fmt.format(t[v][key]) for v in labels) + f" | {ratio} |"

    ops = sorted(set().union(*(t[v]["steps_by_operation"] for v in labels)))
    op_rows = [f"| &nbsp;&nbsp;{op} | " + " | ".join(f"{t[v]['steps_by_operation'].get(op, 0):.2f}" for v in labels) + " | |" for op in ops]
    hashes = {v: versions[v]["result"]["transcript_sha256"] for v in labels}
    same = len(set(hashes.values())) == 1
    goal = GOALS["dynamodb_requests_per_turn"]
    inline = INLINE in versions
    lines = [
        BEGIN,
        "## A turn's cost, before and after (issue 28)",
        "",
        "Generated by `bench/turns/` (do not edit by hand between the markers). Regenerate with `make bench-turns` "
        f"(`.venv/bin/python -m bench.turns --baseline {doc['baseline']}`).",
        "",
        f"The same {turns}-turn scenario (each turn one model call and one read tool call, then a summary: bench/speed's read loop) "
        "run by two versions of Longstep in fresh processes, one after the other in one session (three runs): **before** is commit "
        f"`{doc['baseline']}`, **after** the working tree at `{doc['head']}` with the triage agent as shipped (every call in CallTool)"
        + (
            ", and **reads inline** the same tree with the triage agent running its read tools inside ModelTurn "
            "(`agents.triage_inline`: `Agent(..., inline_read_tools=True)`, docs/cost.md)"
            if inline
            else ""
        )
        + "; each on the local stack with AWS enforcement on, "
        "after one warm-up run. Requests are the runtime's own (the handlers' boto3 clients), by what they are for: the "
        "checkpoint table's step, run and context records (and the idempotency table's step locks, before); the run's event stream (its `event#` records); the tools' own "
        "tables. CPU is the whole process's over the run phase (engine and handlers). The price is list prices "
        "(`infra/prices.json`) per 1,000 turns, model tokens aside: state transitions, Lambda requests, every DynamoDB "
        f"request at one request unit; the second price adds ModelTurn's Lambda waiting {MODEL_WAIT_SECONDS} s for the model each turn.",
        "",
        f"| per turn ({turns} turns) | " + " | ".join(HEADINGS[v] for v in labels) + f" | {HEADINGS[labels[-1]]} / before |",
        "|---|" + "---:|" * (len(labels) + 1),
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
        row("**price per 1,000 turns**, model tokens aside", "price", "${:.4f}"),
        row(f"the same, the model answering in {MODEL_WAIT_SECONDS} s", "price_wait", "${:.4f}"),
        "",
        "Transcript hashes: " + ", ".join(f"{HEADINGS[v]} `{h[:12]}`" for v, h in hashes.items()) + f" ({'the same' if same else 'DIFFERENT'}).",
        "",
        "| goal | measured | verdict |",
        "|---|---|---|",
        f"| at most {goal:.0f} DynamoDB requests of the runtime in a turn with one tool call (steps, run and context records; "
        f"the event stream counted apart) | median {a['one_call_turn_median']:.0f} (max {a['one_call_turn_max']:.0f}); "
        f"{a['runtime_requests']:.2f} per turn with the run's own | **{'met' if a['one_call_turn_median'] <= goal else 'not met'}** |",
        f"| at most {GOALS['transitions_per_turn']:.0f} state transitions per turn with one tool call | {a['state_transitions']:.2f} per turn "
        f"| **{'met' if a['state_transitions'] <= GOALS['transitions_per_turn'] + RUN_STATES_ALLOWANCE else 'not met'}** (a turn enters "
        + ("ModelTurn and Route, its read call recorded inside ModelTurn" if inline else "ModelTurn, Route and CallOneTool")
        + "; the figure includes the run's own BindAgent, Init, hand-overs and Finish, "
        f"allowed {RUN_STATES_ALLOWANCE} a turn) |",
        f"| the price of a turn at most {GOALS['price_ratio']}x of before, model tokens aside | {a['price'] / b['price']:.2f}x "
        f"(${a['price']:.4f} against ${b['price']:.4f} per 1,000 turns; {a['price_wait'] / b['price_wait']:.2f}x with a {MODEL_WAIT_SECONDS} s model) "
        f"| **{'met' if a['price'] <= GOALS['price_ratio'] * b['price'] else 'not met'}** |",
        "",
        "Machine: {}. Wall seconds of the run phases: {} (a shared 2-core machine: CPU is the figure to compare).".format(
            doc["machine"], ", ".join(f"{HEADINGS[v]} {versions[v]['result']['wall_seconds']:.1f}" for v in labels)
        ),
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
        runs = (("before", base_tree, Path(tmp) / "overlay", None), ("after", ROOT, None, None), (INLINE, ROOT, None, INLINE_CONTEXT))
        for label, project, overlay, context in runs:
            result = probe(label, project, overlay, scenario, Path(tmp) / f"{label}.json", context)
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
