"""The ``longstep`` command: run scenarios on the local stack, and start or inspect runs on AWS."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence


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


def cmd_start(args: argparse.Namespace) -> int:
    import boto3

    from longstep.inputs import StartInput, parse_model

    payload = json.loads(Path(args.input).read_text())
    start = parse_model(StartInput, payload, "start input")
    arn = args.state_machine_arn or _stack_output(args.stack, "StateMachineArn")
    resp = boto3.client("stepfunctions").start_execution(stateMachineArn=arn, name=start.run_id, input=json.dumps(payload))
    print(resp["executionArn"])
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    import boto3

    arn = args.state_machine_arn or _stack_output(args.stack, "StateMachineArn")
    execution_arn = arn.replace(":stateMachine:", ":execution:") + f":{args.run_id}"
    desc = boto3.client("stepfunctions").describe_execution(executionArn=execution_arn)
    print(json.dumps({k: desc.get(k) for k in ("status", "startDate", "stopDate", "output", "error", "cause")}, default=str, indent=2))
    return 0


def _stack_output(stack_name: str, key: str) -> str:
    import boto3

    stack = boto3.client("cloudformation").describe_stacks(StackName=stack_name)["Stacks"][0]
    for output in stack.get("Outputs", []):
        if output["OutputKey"] == key:
            return output["OutputValue"]
    raise SystemExit(f"error: stack {stack_name} has no output {key}")


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="longstep", description="Durable long-horizon agents on AWS Step Functions.")
    sub = root.add_subparsers(dest="command", required=True)

    local = sub.add_parser("local", help="run on the local stack (moto, in-process Lambda)").add_subparsers(dest="local_command", required=True)
    run = local.add_parser("run", help="run a scenario file end to end")
    run.add_argument("scenario", help="a scenario file, e.g. events/scenarios/triage.json")
    run.add_argument("--report", help="write the JSON report here")
    run.add_argument("--approve", choices=["auto", "reject", "interactive"], default="auto",
                     help="auto: the scenario's decisions, else approve (default); reject: reject all; interactive: ask")
    run.add_argument("--run-id", help="run id (default: derived from the scenario)")
    run.add_argument("--quiet", action="store_true", help="print only the summary")
    run.set_defaults(func=cmd_local_run)

    for name, func, helptext in (("start", cmd_start, "start a run on AWS"), ("status", cmd_status, "show a run's execution on AWS")):
        p = sub.add_parser(name, help=helptext)
        if name == "start":
            p.add_argument("--input", required=True, help="start input JSON file, e.g. events/start_input.json")
        else:
            p.add_argument("run_id")
        p.add_argument("--stack", default="Longstep", help="deployed stack name (default Longstep)")
        p.add_argument("--state-machine-arn", help="use this state machine instead of the stack's")
        p.set_defaults(func=func)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    import os

    from infra.local.synth import quiet_node_banner

    quiet_node_banner()
    args = parser().parse_args(argv)
    from infra.local.scenario import ScenarioError
    from longstep.errors import LongstepError

    try:
        return args.func(args)
    except (ScenarioError, LongstepError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
