"""``longstep local run`` of a workflow scenario (a scenario file with a ``workflow`` key)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def print_summary(report: dict[str, Any]) -> None:
    """The run in a few lines: outcome, steps, invocations, waits, faults."""
    print(
        f"\n{report['status']}: workflow {report['workflow']} run {report['run_id']}: {len(report['steps'])} recorded calls, "
        f"{report['steps_executed']} steps executed, {report['effects_executed']} effects, {report['wall_seconds']} s "
        f"({report['virtual_seconds']:.0f} s virtual)\n"
        f"  {report['executions']} executions, {report['lambda_invocations']} Lambda invocations ({report['failed_invocations']} failed), "
        f"{report['state_transitions']} state transitions, {report['history_events']} history events\n"
        f"  log sha256 {report['log_sha256']}"
    )
    for wait in report["waits"]:
        print(f"  sleep at position {wait['seq']}: {wait['seconds']} s, {wait['lambda_invocations_during']} Lambda invocations meanwhile")
    if report.get("faults_injected"):
        print("  faults injected: " + ", ".join(f"{f['point']}@{f['turn']}" for f in report["faults_injected"]))
    if report.get("output") is not None:
        print(f"  output: {json.dumps(report['output'])[:300]}")
    if report["status"] != "SUCCEEDED":
        print(f"  error: {report.get('error')}: {report.get('cause')}")


def cmd_local_run_workflow(args: argparse.Namespace) -> int:
    """Run a workflow scenario on a local stack that serves its workflow."""
    from longstep_kit.local.faults import FaultSpecError, parse_fault
    from longstep_kit.local.runner import RunOptions
    from longstep_kit.local.stack import LocalStack
    from longstep_kit.local.workflow_run import load_workflow_scenario, run_workflow_scenario, stack_context

    scenario = load_workflow_scenario(args.scenario)
    unsupported = [flag for flag, value in (("--faults", args.faults), ("--restart-at", args.restart_at), ("--throttle", args.throttle)) if value]
    if unsupported:
        print(f"error: {', '.join(unsupported)}: not supported for workflow scenarios (use --fault POINT@POSITION)", file=sys.stderr)
        return 2
    try:
        planned = [parse_fault(spec) for spec in args.fault]
    except FaultSpecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    emit = None if args.quiet else (lambda line: print(line, flush=True))
    if emit:
        emit(f"deploying the stack into moto and running workflow scenario {scenario.name!r}...")
    with LocalStack(context=stack_context(scenario), enforce=not args.no_enforce) as stack:
        options = RunOptions(approve=args.approve if args.approve != "interactive" else "auto", run_id=args.run_id, emit=emit, faults=planned)
        report = run_workflow_scenario(stack, scenario, options)
    if args.report:
        Path(args.report).write_text(json.dumps(report, indent=2, default=str) + "\n")
    print_summary(report)
    return 0 if report["status"] == scenario.expect.status else 1
