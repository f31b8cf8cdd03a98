"""Commands against a deployed stack: start, inspect and resume runs."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def stack_output(stack_name: str, key: str) -> str:
    """An output of the deployed stack (the state machine ARN, a table name...)."""
    import boto3

    stack = boto3.client("cloudformation").describe_stacks(StackName=stack_name)["Stacks"][0]
    for output in stack.get("Outputs", []):
        if output["OutputKey"] == key:
            return output["OutputValue"]
    raise SystemExit(f"error: stack {stack_name} has no output {key}")


def cmd_start(args: argparse.Namespace) -> int:
    import boto3

    from longstep.inputs import StartInput, parse_model

    payload = json.loads(Path(args.input).read_text())
    start = parse_model(StartInput, payload, "start input")
    arn = args.state_machine_arn or stack_output(args.stack, "StateMachineArn")
    resp = boto3.client("stepfunctions").start_execution(stateMachineArn=arn, name=start.run_id, input=json.dumps(payload))
    print(resp["executionArn"])
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    import boto3

    arn = args.state_machine_arn or stack_output(args.stack, "StateMachineArn")
    execution_arn = arn.replace(":stateMachine:", ":execution:") + f":{args.run_id}"
    desc = boto3.client("stepfunctions").describe_execution(executionArn=execution_arn)
    shown: dict[str, Any] = {k: desc.get(k) for k in ("status", "startDate", "stopDate", "output", "error", "cause")}
    print(json.dumps(shown, default=str, indent=2))
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    import boto3

    from longstep_kit.ops import runs as client

    arn = args.state_machine_arn or stack_output(args.stack, "StateMachineArn")
    print(client.resume(boto3.client("stepfunctions"), arn, args.run_id))
    return 0


def add_stack_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stack", default="Longstep", help="deployed stack name (default Longstep)")
    p.add_argument("--state-machine-arn", help="use this state machine instead of the stack's")


def register(sub: Any) -> None:
    start = sub.add_parser("start", help="start a run on AWS")
    start.add_argument("--input", required=True, help="start input JSON file, e.g. events/start_input.json")
    add_stack_options(start)
    start.set_defaults(func=cmd_start)
    status = sub.add_parser("status", help="show a run's execution on AWS")
    status.add_argument("run_id")
    add_stack_options(status)
    status.set_defaults(func=cmd_status)
    resume = sub.add_parser("resume", help="resume a run on AWS: a new execution replays what is recorded")
    resume.add_argument("run_id")
    add_stack_options(resume)
    resume.set_defaults(func=cmd_resume)
