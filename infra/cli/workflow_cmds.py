"""``longstep local run`` of a workflow scenario (a scenario file with a ``workflow`` key)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def step_lines(steps: list[dict[str, Any]]) -> list[str]:
    """The workflow's recorded calls in order, one line each: position (and branch), kind, name."""
    from longstep.workflows.log import parse_step_key

    out = []
    for step in steps:
        seq, branch = parse_step_key(step["sk"])
        where = f"{seq}" if branch is None else f"{seq}.{branch}"
        name = step.get("name") or ""
        out.append(f"  step {where:<5} {step['kind']:<8} {'' if name == step['kind'] else name}".rstrip())
    return out


def print_summary(report: dict[str, Any]) -> None:
    """The run in a few lines: outcome, steps, invocations, waits, faults."""
    from longstep_kit.local.faults import fault_label

    print(
        f"\n{report['status']}: workflow {report['workflow']} run {report['run_id']}: {len(report['steps'])} recorded calls, "
        f"{report['steps_executed']} steps executed, {report['effects_executed']} effects, {report['wall_seconds']} s "
        f"({report['virtual_seconds']:.0f} s virtual)\n"
        f"  {report['executions']} executions, {report['lambda_invocations']} Lambda invocations ({report['failed_invocations']} failed), "
        f"{report['state_transitions']} state transitions, {report['history_events']} history events\n"
        f"  log sha256 {report['log_sha256']}"
    )
    for line in step_lines(report["steps"]):
        print(line)
    for wait in report["waits"]:
        print(f"  sleep at position {wait['seq']}: {wait['seconds']} s, {wait['lambda_invocations_during']} Lambda invocations meanwhile")
    for child in report.get("children", []):
        print(
            f"  child at position {child['position']}: agent {child['agent']} run {child['run_id']} {child['status']}, "
            f"transcript sha256 {child['transcript_sha256']}, {child['effects']['duplicate_effects']} duplicate effects"
        )
    if report.get("restarts"):
        print(f"  restarts: {report['restarts']}")
    if report.get("faults_injected"):
        print("  faults injected: " + ", ".join(fault_label(f, report.get("run_id")) for f in report["faults_injected"]))
    if report.get("faults_unfired"):
        print(f"  faults that never fired ({len(report['faults_unfired'])}, their step never ran): " + ", ".join(report["faults_unfired"]))
    if report.get("output") is not None:
        print(f"  output: {json.dumps(report['output'])[:300]}")
    if report["status"] != "SUCCEEDED":
        print(f"  error: {report.get('error')}: {report.get('cause')}")


def cmd_local_run_workflow(args: argparse.Namespace) -> int:
    """Run a workflow scenario on a local stack that serves its workflow.

    ``--fault POINT@N``, ``--faults random:K --seed S`` and ``--restart-at N`` count N as a step's
    position in the workflow's log (or a turn of a child agent run). The fault points a run offers
    are found by a clean run first (under another run id, its data reset after), so a planned
    fault that could never fire is refused and ``random:K`` draws from the points that exist.
    """
    from longstep_kit.local.faults import Fault, FaultSpecError, parse_fault, sample_faults
    from longstep_kit.local.runner import RunOptions
    from longstep_kit.local.stack import LocalStack
    from longstep_kit.local.workflow_run import load_workflow_scenario, run_workflow_scenario, stack_context

    scenario = load_workflow_scenario(args.scenario)
    if args.throttle:
        print("error: --throttle: not supported for workflow scenarios", file=sys.stderr)
        return 2
    try:
        planned = [parse_fault(spec) for spec in args.fault]
    except FaultSpecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from longstep_kit.local.progress import line_writer

    emit = None if args.quiet else line_writer()
    if emit:
        emit(f"deploying the stack into moto and running workflow scenario {scenario.name!r}...")
    run_id = args.run_id or scenario.run_id or scenario.name
    with LocalStack(context=stack_context(scenario), enforce=not args.no_enforce, enforcement_announced=args.no_enforce, progress=emit) as stack:
        approve = args.approve if args.approve != "interactive" else "auto"
        if planned or args.faults or args.restart_at is not None:
            probe = run_workflow_scenario(stack, scenario, RunOptions(approve=approve, run_id=f"{run_id}-probe"))
            stack.reset_data()
            offered = [Fault(point, turn) for point, turn in probe["faults_offered"]]
            try:
                planned += sample_faults(args.faults, args.seed, offered, "in this scenario's run") if args.faults else []
            except FaultSpecError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 2
            refused = _never_fire(planned, args.restart_at, offered)
            if refused:
                print(f"error: {refused}", file=sys.stderr)
                return 2
        options = RunOptions(approve=approve, run_id=args.run_id, emit=emit, faults=planned, restart_at=args.restart_at, seed=args.seed)
        report = run_workflow_scenario(stack, scenario, options)
    if args.report:
        Path(args.report).write_text(json.dumps(report, indent=2, default=str) + "\n")
    print_summary(report)
    return 0 if report["status"] == scenario.expect.status else 1


def _never_fire(planned: list[Any], restart_at: int | None, offered: list[Any]) -> str | None:
    """The first planned fault (or restart) that the scenario's run never reaches, as an error line."""
    from longstep import faults

    points = {(f.point, f.turn) for f in offered}
    for fault in planned:
        if (fault.point, fault.turn) not in points:
            return f"--fault {fault.point}@{fault.turn}: the scenario's run never reaches it (it offers {len(points)} fault points)"
    if restart_at is not None and (faults.BEFORE_TOOL, restart_at) not in points:
        return f"--restart-at: no step starts at position {restart_at} (nor a child's tool call in turn {restart_at})"
    return None
