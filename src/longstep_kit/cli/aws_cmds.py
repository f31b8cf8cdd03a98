"""Commands against a deployed stack: start, inspect and resume runs."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def stack_output(args: argparse.Namespace, key: str) -> str:
    """An output of the deployed stack ``--stack`` (the state machine ARN, a table name...)."""
    return args.aws.stack_output(args.stack, key)


def cmd_start(args: argparse.Namespace) -> int:
    from longstep.inputs import StartInput, parse_model

    payload = json.loads(Path(args.input).read_text())
    start = parse_model(StartInput, payload, "start input")
    arn = args.state_machine_arn or stack_output(args, "StateMachineArn")
    resp = args.aws.client("stepfunctions").start_execution(stateMachineArn=arn, name=start.run_id, input=json.dumps(payload))
    print(resp["executionArn"])
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    arn = args.state_machine_arn or stack_output(args, "StateMachineArn")
    execution_arn = arn.replace(":stateMachine:", ":execution:") + f":{args.run_id}"
    desc = args.aws.client("stepfunctions").describe_execution(executionArn=execution_arn)
    shown: dict[str, Any] = {k: desc.get(k) for k in ("status", "startDate", "stopDate", "output", "error", "cause")}
    print(json.dumps(shown, default=str, indent=2))
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    from longstep_kit.ops import runs as client

    arn = args.state_machine_arn or stack_output(args, "StateMachineArn")
    print(client.resume(args.aws.client("stepfunctions"), arn, args.run_id))
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
