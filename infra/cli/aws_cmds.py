"""Commands against a deployed stack: start, inspect and resume runs."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from longstep_kit.cli.targets import add_stack_options, stack_output, steering_of
from longstep_kit.cli.where import add_where, one_or_where, register_redrive


def cmd_start(args: argparse.Namespace) -> int:
    from longstep.inputs import StartInput, parse_model

    from longstep.json_input import parse_json

    payload = parse_json(*_input_text(args.input))
    parse_model(StartInput, payload, "start input")
    _check_agent(str(payload.get("agent", "")))
    from longstep_kit.cli.local_model import check_local_model

    check_local_model(args, payload)  # a local endpoint answers no Bedrock model: say how to script one
    if args.state_machine_arn:  # a state machine named outright: started as it is
        arn = args.state_machine_arn
        print(
            args.aws.client("stepfunctions").start_execution(stateMachineArn=arn, name=payload["run_id"], input=json.dumps(payload))["executionArn"]
        )
        return 0
    # On the deploy alias (the run keeps this deploy's code: docs/deploy.md "Pinning"); a run id
    # that is running gets the new goal as the --if-running policy says.
    print(steering_of(args).start(payload, args.if_running))
    return 0


def _check_agent(name: str) -> None:
    """The start input's agent: a valid name, and one the project's ``cdk.json`` registers (when run in a project).

    Raises:
        CliError: it is not (exit 2, before anything is started).
    """
    import re

    from longstep_kit.cli.errors import CliError
    from longstep_kit.config import AGENT_NAME

    if not re.match(AGENT_NAME, name):
        raise CliError(f"start input: agent: {name!r} is not an agent name (a letter, then letters, digits, _ or -; at most 64)")
    from longstep_kit.project import ProjectNotFoundError, cdk_context, find_project

    try:
        registered = dict(cdk_context(find_project()).get("longstep", {}).get("agents") or {})
    except (ProjectNotFoundError, OSError, ValueError):
        return  # outside a project: the stack's Init refuses an unknown agent (UnknownAgentError)
    if registered and name not in registered:
        raise CliError(f"start input: agent: {name!r} is not registered in cdk.json's longstep.agents (registered: {', '.join(sorted(registered))})")


def _input_text(value: str) -> tuple[str, str]:
    """``--input`` as the AWS CLI takes it: inline JSON, ``-`` for stdin, ``file://PATH``, or a
    path (as before); returns the text and what to call it in an error."""
    import sys

    if value == "-":
        return sys.stdin.read(), "--input (stdin)"
    if value.startswith("file://"):
        return Path(value[len("file://") :]).read_text(), value[len("file://") :]
    if value.lstrip().startswith("{"):
        return value, "--input"
    return Path(value).read_text(), value


def cmd_status(args: argparse.Namespace) -> int:
    """The run's status (``longstep.run_status``) from its latest execution (a run that continued as
    new has several); exit 0 succeeded or not ended, 1 ended otherwise (stopped included)."""
    from longstep import run_status
    from longstep_kit.ops import runs

    arn = args.state_machine_arn or stack_output(args, "StateMachineArn")
    sfn = args.aws.client("stepfunctions")
    latest = runs.latest_execution(sfn, arn, args.run_id)
    desc = sfn.describe_execution(executionArn=latest["executionArn"])
    execution_status = desc["status"]
    output = json.loads(desc["output"]) if desc.get("output") else {}
    stop = output.get("stop") if isinstance(output, dict) else None
    if execution_status == "RUNNING":
        from longstep_kit.cli.errors import CliError
        from longstep_kit.cli.targets import inspector_of

        try:
            status, _, _, reason = inspector_of(args).open_state(args.run_id)
        except CliError:  # a state machine named without its stack: its records are not known here
            status, reason = run_status.RUNNING, None
    else:
        status = run_status.of_ended(execution_status, output)
        reason = run_status.stop_reason(output) or desc.get("error") or ("max_turns" if stop == "max_turns" else None)
    shown: dict[str, Any] = {"run_id": args.run_id, "status": status, "reason": reason, "execution": desc.get("name")}
    shown.update({"execution_status": execution_status}, **{k: desc.get(k) for k in ("startDate", "stopDate", "output", "error", "cause")})
    shown["stop"] = stop
    from longstep_kit.cli.structured import print_data, wants_data

    if wants_data(args):
        print_data(args, shown)
        return run_status.exit_code(status)
    told = status
    if status == run_status.SUCCEEDED and stop == "max_turns":
        told += " (max_turns: the agent did not finish)"
    elif status == run_status.STOPPED:
        told += f" ({reason})"
    print(f"run {args.run_id}: {told} (execution {desc.get('name')} {execution_status}, started {desc.get('startDate')})")
    if desc.get("error") or status in (run_status.FAILED, run_status.TIMED_OUT, run_status.ABORTED):
        from longstep_kit.cli.failure_lines import cause_summary, failure_lines
        from longstep_kit.ops.views.history import execution_history

        print(f"  error: {desc.get('error')}: {cause_summary(desc.get('cause'))}")
        # One line per failed state, never a Lambda's stack trace or its file paths.
        for line in failure_lines(execution_history(sfn, latest["executionArn"]), args.run_id, "longstep show {run}")[:-1]:
            print(line)
        print(f"  look: longstep show {args.run_id} (its steps); the functions' logs in CloudWatch (or the local run's engine log)")
    return run_status.exit_code(status)


def cmd_resume(args: argparse.Namespace) -> int:
    """A paused run continues where it paused; a failed or stopped one restarts in a new execution."""
    print(steering_of(args).resume(args.run_id, force=args.force))
    return 0


def register(sub: Any) -> None:
    start = sub.add_parser("start", help="start a run on AWS")
    start.add_argument(
        "--input", required=True, help="the start input: inline JSON, - for stdin, file://PATH or a path, e.g. file://events/start_input.json"
    )
    start.add_argument(
        "--if-running",
        choices=("reject", "enqueue", "interrupt"),
        default="reject",
        help="when the run id is running: refuse (default), give it the goal as a message, or interrupt its turn with it",
    )
    start.add_argument("--checkpoint-table", help="use this checkpoint table instead of the stack's")
    add_stack_options(start)
    start.set_defaults(func=cmd_start)
    status = sub.add_parser(
        "status", help="a run's status (running, paused, ..., succeeded, stopped, failed); exit 1 when it ended without succeeding, stopped included"
    )
    status.add_argument("run_id")
    add_stack_options(status)
    status.set_defaults(func=cmd_status)
    resume = sub.add_parser("resume", help="continue a paused run, or restart a failed or stopped one (a new execution replays what is recorded)")
    resume.add_argument("run_id", nargs="?")
    resume.add_argument("--force", action="store_true", help="resume even a run whose latest execution succeeded")
    resume.add_argument("--checkpoint-table", help="use this checkpoint table instead of the stack's")
    add_where(resume, "resume")
    add_stack_options(resume)
    resume.set_defaults(func=one_or_where("resume", cmd_resume))
    register_redrive(sub)
