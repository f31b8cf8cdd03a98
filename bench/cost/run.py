"""Run scenarios on the local stack and price what they used, per 1,000 agent turns.

For each scenario (``events/scenarios/triage.json`` and a longer synthetic session of read-only
tool calls), a local run gives the counts (the run report's ``lambda_invocations``,
``state_transitions`` and ``storage``) and ``longstep_kit.ops.views`` gives the rest from the
execution histories and the run's records: Lambda durations and GB-seconds, retries, DynamoDB
request units, S3 requests. ``longstep_kit.ops.views.cost.estimate_cost`` prices them with
``infra/prices.json``, without model tokens, and the result is scaled to 1,000 turns.

Every scenario runs twice: on the stack as shipped, and with the triage agent running its read
tools inside ModelTurn (``agents.triage_inline``; columns named ``..., reads inline``).

Writes ``bench/results/cost.json`` and the cost section of ``bench/RESULTS.md`` (between its own
markers; the rest of the file is left as it is).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from bench.sections import write_section

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "cost.json"
REPORT = ROOT / "bench" / "RESULTS.md"
TRIAGE = ROOT / "events" / "scenarios" / "triage.json"
PRICES = ROOT / "infra" / "prices.json"
BEGIN, END = "<!-- bench-cost:begin -->", "<!-- bench-cost:end -->"
# What users pay includes the ModelTurn Lambda waiting for the model: priced at this latency per call.
MODEL_WAIT_SECONDS = 5
DEFAULT_SYNTHETIC_TURNS = 60
# The same scenarios again with the triage agent running its read tools inside ModelTurn
# (``Agent.inline_read_tools``: agents.triage_inline, deployed under the name triage).
INLINE_CONTEXT = {"longstep": {"agents": {"triage": "agents.triage_inline:build"}}}
INLINE_SUFFIX = ", reads inline"


def synthetic(turns: int) -> Any:
    """A session of ``turns`` model turns over the triage world: searches and document reads
    (every fifth turn two reads in parallel), then a summary."""
    from longstep_kit.local.scenario import Scenario

    base = json.loads(TRIAGE.read_text())
    docs = ["runbook-payments", "arch-orders"]
    script: dict[str, Any] = {}
    for turn in range(turns - 1):
        if turn % 5 == 4:
            calls = [{"name": "read_document", "input": {"doc_id": doc}} for doc in docs]
        elif turn % 2:
            calls = [{"name": "read_document", "input": {"doc_id": docs[turn % 2]}}]
        else:
            calls = [{"name": "search_docs", "input": {"query": ["payments", "order", "retry"][turn % 3]}}]
        script[str(turn)] = {"text": f"Step {turn}: looking further.", "tool_calls": calls}
    script[str(turns - 1)] = {"text": f"Summary: read the docs over {turns - 1} turns; nothing to change."}
    world = {"documents": [d for d in base["world"]["documents"] if d["doc_id"] in docs], "tickets": []}
    return Scenario.model_validate(
        {
            "name": f"synthetic-{turns}",
            "description": f"{turns} turns of searches and reads (every fifth turn two reads in parallel), then a summary",
            "input": {"goal": "Read the payments docs and summarize them.", "agent": "triage", "max_turns": turns + 1},
            "world": world,
            "turns": script,
        }
    )


def measure(stack: Any, scenario: Any, prices: Any, suffix: str = "") -> dict[str, Any]:
    """Run ``scenario`` once on a clean stack and price it (``suffix``: what its name says of the stack)."""
    from longstep_kit.local.runner import RunOptions, run_scenario
    from longstep_kit.ops.views.cost import estimate_cost
    from longstep_kit.ops.views.inspector import RunInspector

    stack.reset_data()
    run_id = f"bench-cost-{scenario.name}"
    first = len(stack.dispatcher.invocations)
    report = run_scenario(stack, scenario, RunOptions(run_id=run_id))
    invocations = stack.dispatcher.invocations[first:]
    if report["status"] != "SUCCEEDED":
        raise RuntimeError(f"{scenario.name}: the run ended {report['status']}: {report.get('error')}: {report.get('cause')}")
    inspector = RunInspector(
        stack.state_machine_arn,
        stack.outputs["CheckpointTableName"],
        stack.outputs.get("ApprovalsTableName"),
        sfn=stack.client("stepfunctions"),
        dynamodb=stack.client("dynamodb"),
        lambda_client=stack.client("lambda"),
    )
    view = inspector.view(run_id, memory=True)
    usage = view.usage
    # The history's Lambda time is 0 locally (the virtual clock stands still while a handler
    # runs: docs/local-fidelity.md), so compute is priced from the handlers' own time as the
    # dispatcher measured it: this machine's speed, not Lambda's, but not $0.
    usage.lambda_seconds = sum(i.seconds for i in invocations)
    usage.lambda_gb_seconds = sum(i.seconds * inspector.memory_mb(i.function) / 1024 for i in invocations)
    estimate = estimate_cost(usage, prices, include_model=False)
    model_fn = next(a.function for a in view.attempts if a.state == "ModelTurn")
    model_memory_gb = inspector.memory_mb(model_fn) / 1024
    scale = 1000 / usage.turns
    # Storage as the run left it (the stack was emptied before the run): checkpoint records and
    # locks in DynamoDB, artifacts in S3 as stored (compressed), the model script included.
    stored = report["storage"]
    storage_per_month = (stored["dynamodb_bytes"] * prices.dynamodb.per_gb_month + stored["s3_bytes"] * prices.s3.per_gb_month) / 1024**3
    return {
        "scenario": scenario.name + suffix,
        "description": scenario.description,
        "run_id": run_id,
        "status": report["status"],
        "turns": usage.turns,
        "tool_calls": usage.tool_calls,
        "report": {
            "lambda_invocations": report["lambda_invocations"],
            "state_transitions": report["state_transitions"],
            "storage": report["storage"],
            "wall_seconds": report["wall_seconds"],
        },
        "usage": usage.as_dict(),
        # The report counts what the dispatcher saw; the usage what the histories show: the same runs.
        "history_matches_report": usage.lambda_invocations == report["lambda_invocations"] and usage.state_transitions == report["state_transitions"],
        "durations": {
            "wall_seconds": report["wall_seconds"],
            "lambda_seconds": round(usage.lambda_seconds, 4),
            "lambda_ms_per_invocation": round(1000 * usage.lambda_seconds / usage.lambda_invocations, 2),
        },
        "memory_mb": sorted({inspector.memory_mb(a.function) for a in view.attempts}),
        "cost": estimate.as_dict(),
        "per_1000_turns": {
            "dollars": estimate.infrastructure * scale,
            "by_item": {line.item: line.dollars * scale for line in estimate.lines},
            "lambda_invocations": usage.lambda_invocations * scale,
            "billed_transitions": usage.billed_transitions * scale,
            "dynamodb_write_units": usage.dynamodb_write_units * scale,
            "dynamodb_read_units": usage.dynamodb_read_units * scale,
            "storage_per_month": storage_per_month * scale,
            # In AWS a model turn's Lambda waits for the model: each second of it, on every turn.
            "per_second_of_model_latency": 1000 * model_memory_gb * prices.lambda_.per_gb_second,
            f"with_model_wait_{MODEL_WAIT_SECONDS}s": estimate.infrastructure * scale
            + MODEL_WAIT_SECONDS * 1000 * model_memory_gb * prices.lambda_.per_gb_second,
        },
    }


def render(doc: dict[str, Any]) -> str:
    """The cost section of RESULTS.md."""
    runs = doc["scenarios"]
    head = "| | " + " | ".join(f"{r['scenario']} ({r['turns']} turns)" for r in runs) + " |"
    rule = "|---|" + "---:|" * len(runs)

    def row(label: str, fn: Any) -> str:
        return f"| {label} | " + " | ".join(fn(r) for r in runs) + " |"

    def usd(x: float) -> str:
        return f"${x:,.5f}" if x < 0.001 else f"${x:,.4f}" if x < 1 else f"${x:,.2f}"

    per = lambda r, item: usd(r["per_1000_turns"]["by_item"][item])  # noqa: E731
    ex = doc["model_turn_example"]
    lines = [
        BEGIN,
        "## Infrastructure cost per 1,000 agent turns (issue 7)",
        "",
        "Generated by `bench/cost/` (do not edit by hand between the markers). Regenerate with `make bench-cost` (`.venv/bin/python -m bench.cost`).",
        "",
        f"Each scenario runs once on the local stack (moto, the real handlers in-process, {doc.get('enforcement', 'enforcement unknown')}); its counts are priced with "
        f"`infra/prices.json` ({doc['prices']['region']} list prices as of {doc['prices']['as_of']}), **without model "
        f"tokens**, and scaled to 1,000 turns. Lambda memory {doc['lambda_memory_mb']} MB (the stack's `lambda_memory_mb`).",
        "",
        head,
        rule,
        row("tool calls", lambda r: f"{r['tool_calls']}"),
        row(
            "Lambda invocations (report) / per turn",
            lambda r: f"{r['report']['lambda_invocations']} / {r['report']['lambda_invocations'] / r['turns']:.2f}",
        ),
        row(
            "state transitions (report) / per turn",
            lambda r: f"{r['report']['state_transitions']} / {r['report']['state_transitions'] / r['turns']:.2f}",
        ),
        row(
            "Lambda time, local (ms per invocation)",
            lambda r: f"{r['durations']['lambda_seconds']:.2f} s ({r['durations']['lambda_ms_per_invocation']:.1f})",
        ),
        row("DynamoDB WRU / RRU (estimated)", lambda r: f"{r['usage']['dynamodb_write_units']} / {r['usage']['dynamodb_read_units']}"),
        row(
            "stored (report): DynamoDB / S3",
            lambda r: f"{r['report']['storage']['dynamodb_bytes'] / 1024:,.1f} KB / {r['report']['storage']['s3_bytes'] / 1024:,.1f} KB",
        ),
        row("Step Functions, per 1k turns", lambda r: per(r, "step functions transitions")),
        row("Lambda requests, per 1k turns", lambda r: per(r, "lambda requests")),
        row("Lambda compute (local durations), per 1k turns", lambda r: per(r, "lambda compute")),
        row(
            "DynamoDB requests, per 1k turns",
            lambda r: usd(r["per_1000_turns"]["by_item"]["dynamodb writes"] + r["per_1000_turns"]["by_item"]["dynamodb reads"]),
        ),
        row("S3 requests, per 1k turns", lambda r: usd(r["per_1000_turns"]["by_item"]["s3 puts"] + r["per_1000_turns"]["by_item"]["s3 gets"])),
        row("**total per 1,000 turns**", lambda r: f"**{usd(r['per_1000_turns']['dollars'])}**"),
        row("+ per second of model latency per turn", lambda r: usd(r["per_1000_turns"]["per_second_of_model_latency"])),
        row(
            f"**total per 1,000 turns, the model answering in {MODEL_WAIT_SECONDS} s**",
            lambda r: f"**{usd(r['per_1000_turns'][f'with_model_wait_{MODEL_WAIT_SECONDS}s'])}**",
        ),
        row("storage per 1k turns, per month kept", lambda r: usd(r["per_1000_turns"]["storage_per_month"])),
        "",
        "How to read it:",
        "",
        "- Step Functions transitions dominate: about "
        + " / ".join(f"{r['usage']['billed_transitions'] / r['turns']:.1f}" for r in runs)
        + " billed transitions per turn, at $0.025 per 1,000. A turn enters ModelTurn and Route (2), and a turn "
        "whose one call waits for nothing CallOneTool (1: three a turn, docs/cost.md); a turn with several calls, or a "
        "call that waits, the ToolCalls map (1) and Dispatch and CallTool per call (2 each); an approval adds "
        "RequestApproval (1), a retry 1; a run adds BindAgent (a Choice and a Pass: the agent's binding, 2), Init, Finish and Done (3). "
        f'In the columns "{INLINE_SUFFIX.strip(", ")}" the triage agent runs its read tools inside ModelTurn (`Agent.inline_read_tools`): '
        "a turn whose calls are all reads is ModelTurn and Route (2 transitions, 1 invocation); its writes, approvals and waits go as before.",
        "- Lambda compute here is the handlers' own time in-process. In AWS every model turn's Lambda also waits "
        'for the model: the "per second of model latency" row is what each second of it adds per 1,000 turns (the turn\'s '
        "tool calls wait for their tools the same way). Cold starts and network round trips to DynamoDB are not "
        "in the local durations either.",
        "- DynamoDB and S3 requests are estimated from the records, as documented in `docs/operations.md` "
        "(`longstep show RUN_ID --cost` uses the same formula); the triage scenario's two approvals add their "
        "approval-table writes. Storage is what the run left (the stack is emptied before each run): checkpoint "
        "records in DynamoDB (no lock items: a step's record is its own lock), artifacts in S3 as stored (compressed; the scripted model's script "
        "included), kept for the retention period (90 days by default).",
        f"- Model tokens are left out on purpose, and they dominate: one turn of {ex['input_tokens']:,} input and "
        f"{ex['output_tokens']:,} output tokens costs {usd(ex['dollars'])} with {ex['model']}, about "
        f"{ex['dollars'] / (runs[-1]['per_1000_turns']['dollars'] / 1000):,.0f} times the infrastructure of a turn "
        f"({usd(runs[-1]['per_1000_turns']['dollars'] / 1000)}).",
        "",
        f"Counts cross-checked: the histories give the same Lambda invocations and state transitions as the run "
        f"reports: {', '.join(r['scenario'] + ' ' + ('yes' if r['history_matches_report'] else 'NO') for r in runs)}.",
        END,
    ]
    return "\n".join(lines) + "\n"


def _model_turn(prices: Any, input_tokens: int, output_tokens: int) -> dict[str, Any]:
    """What the tokens of one model turn cost with the price table's default model."""
    name, model = prices.model(None)
    dollars = input_tokens * model.per_million_input_tokens / 1e6 + output_tokens * model.per_million_output_tokens / 1e6
    return {"model": name, "input_tokens": input_tokens, "output_tokens": output_tokens, "dollars": dollars}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cost", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--turns", type=int, default=DEFAULT_SYNTHETIC_TURNS, help=f"turns of the synthetic session (default {DEFAULT_SYNTHETIC_TURNS}; 0 skips it)"
    )
    parser.add_argument("--prices", type=Path, default=PRICES)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--report", type=Path, default=REPORT)
    args = parser.parse_args(argv)

    from longstep_kit.local.scenario import load_scenario
    from longstep_kit.local.stack import LocalStack
    from longstep_kit.ops.views.cost import load_prices

    prices = load_prices(args.prices.read_text())
    scenarios = [load_scenario(TRIAGE)] + ([synthetic(args.turns)] if args.turns > 1 else [])
    started = time.perf_counter()
    results = []
    # The agent as shipped, then the same agent running its read tools inside ModelTurn.
    for context, suffix in ((None, ""), (INLINE_CONTEXT, INLINE_SUFFIX)):
        with LocalStack(context=context) as stack:
            if stack.enforcement.policies is None:
                raise RuntimeError("the local stack's enforcement is off: the bench measures what AWS would run")
            for scenario in scenarios:
                print(f"running {scenario.name}{suffix}...", file=sys.stderr, flush=True)
                results.append(measure(stack, scenario, prices, suffix))
    doc = {
        "generated_by": "bench/cost (make bench-cost)",
        "enforcement": "the local stack's AWS enforcement on (IAM against the synthesized roles, payload and history limits, ASL strictness; TTL and the virtual clock: docs/local-fidelity.md)",
        "prices": {
            "file": str(args.prices.relative_to(ROOT)) if args.prices.is_relative_to(ROOT) else str(args.prices),
            "region": prices.region,
            "as_of": prices.as_of,
        },
        "lambda_memory_mb": ", ".join(str(m) for m in sorted({m for r in results for m in r["memory_mb"]})),
        "seconds": round(time.perf_counter() - started, 1),
        "scenarios": results,
        "model_turn_example": _model_turn(prices, 3000, 300),
    }
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(doc, indent=2) + "\n")
    write_section(args.report, render(doc), BEGIN, END)
    for r in results:
        print(f"{r['scenario']}: {r['turns']} turns, ${r['per_1000_turns']['dollars']:.4f} per 1,000 turns (infrastructure, no model tokens)")
    print(f"wrote {args.results} and the cost section of {args.report}")
    return 0
