"""Commands on the local stack: run a scenario end to end on moto."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def _print_summary(report: dict[str, Any]) -> None:
    mc, tc, fx = report["model_calls"], report["tool_calls"], report["effects"]
    print(
        f"\n{report['status']}: run {report['run_id']} in {report['turns']} turns, {report['wall_seconds']} s\n"
        f"  model calls {mc['executed']} executed, {mc['replayed']} replayed; "
        f"tool calls {tc['executed']} executed, {tc['replayed']} replayed\n"
        f"  effects: {fx['physical_sends']} emails sent, {fx['tickets_created']} tickets created, "
        f"{fx['duplicate_effects']} duplicates\n"
        f"  {report['lambda_invocations']} Lambda invocations, {report['state_transitions']} state transitions, "
        f"{report['history_events']} history events\n"
        f"  transcript sha256 {report['transcript_sha256']}"
    )
    if report.get("output"):
        print(f"  output: {report['output'][:300]}")
    if report["status"] != "SUCCEEDED":
        print(f"  error: {report.get('error')}: {report.get('cause')}")


def cmd_local_run(args: argparse.Namespace) -> int:
    from infra.local.runner import RunOptions, run_scenario
    from infra.local.scenario import load_scenario
    from infra.local.stack import LocalStack

    scenario = load_scenario(args.scenario)
    emit = None if args.quiet else (lambda line: print(line, flush=True))
    if emit:
        emit(f"deploying the stack into moto and running scenario {scenario.name!r}...")
    with LocalStack() as stack:
        if emit and stack.skipped_resources:
            emit(f"note: moto does not emulate {', '.join(stack.skipped_resources)} (skipped locally)")
        report = run_scenario(stack, scenario, RunOptions(approve=args.approve, run_id=args.run_id, emit=emit))
    if args.report:
        Path(args.report).write_text(json.dumps(report, indent=2) + "\n")
    _print_summary(report)
    return 0 if report["status"] == "SUCCEEDED" else 1


def register(sub: Any) -> None:
    local = sub.add_parser("local", help="run on the local stack (moto, in-process Lambda)").add_subparsers(dest="local_command", required=True)
    run = local.add_parser("run", help="run a scenario file end to end")
    run.add_argument("scenario", help="a scenario file, e.g. events/scenarios/triage.json")
    run.add_argument("--report", help="write the JSON report here")
    run.add_argument("--approve", choices=["auto", "reject", "interactive"], default="auto",
                     help="auto: the scenario's decisions, else approve (default); reject: reject all; interactive: ask")
    run.add_argument("--run-id", help="run id (default: derived from the scenario)")
    run.add_argument("--quiet", action="store_true", help="print only the summary")
    run.set_defaults(func=cmd_local_run)
