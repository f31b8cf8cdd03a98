"""The deployed stack a command works on: its outputs, its checkpoint store and the steering of its runs."""

from __future__ import annotations

import argparse
from typing import Any

from longstep_kit.cli.errors import CliError


def stack_output(args: argparse.Namespace, key: str) -> str:
    """An output of the deployed stack ``--stack`` (the state machine ARN, a table name...)."""
    return args.aws.stack_output(args.stack, key)


def add_stack_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stack", default="Longstep", help="deployed stack name (default Longstep)")
    p.add_argument("--state-machine-arn", help="use this state machine instead of the stack's")


def targets(args: argparse.Namespace) -> tuple[str, str]:
    """The agent state machine's ARN and the checkpoint table (``--state-machine-arn``,
    ``--checkpoint-table``, else the stack's outputs)."""
    arn = args.state_machine_arn or stack_output(args, "StateMachineArn")
    table = getattr(args, "checkpoint_table", None) or stack_output(args, "CheckpointTableName")
    return arn, table


def checkpoint_store(args: argparse.Namespace, table: str) -> Any:
    """The checkpoint store ``table`` on the command's DynamoDB client."""
    from longstep.store import CheckpointStore

    return CheckpointStore(table, args.aws.client("dynamodb"))


def steering_of(args: argparse.Namespace) -> Any:
    """The ``Steering`` of the target stack (approvals woken by a stop when the stack has the table)."""
    from longstep.humans.table import ApprovalTable
    from longstep_kit.ops.steer import Steering

    arn, table = targets(args)
    store = checkpoint_store(args, table)
    try:
        approvals = ApprovalTable(stack_output(args, "ApprovalsTableName"), args.aws.client("dynamodb"))
    except CliError:
        approvals = None
    return Steering(store, args.aws.client("stepfunctions"), arn, approvals, who=_caller(args))


def _caller(args: argparse.Namespace) -> str:
    try:
        return str(args.aws.client("sts").get_caller_identity()["Arn"])
    except Exception:  # noqa: BLE001 - who steers is recorded when it can be known
        return "cli"


def inspector_of(args: argparse.Namespace) -> Any:
    """The ``RunInspector`` of the target stack (its approvals table when the stack has one)."""
    from longstep_kit.ops.views.inspector import RunInspector

    arn = args.state_machine_arn or stack_output(args, "StateMachineArn")
    checkpoint_table = getattr(args, "checkpoint_table", None) or stack_output(args, "CheckpointTableName")
    approvals = getattr(args, "approvals_table", None)
    if approvals is None:
        try:
            approvals = stack_output(args, "ApprovalsTableName")
        except CliError:  # a stack from before the approvals table: approvals are not shown
            approvals = None
    aws = args.aws
    return RunInspector(
        arn, checkpoint_table, approvals, sfn=aws.client("stepfunctions"), dynamodb=aws.client("dynamodb"), lambda_client=aws.client("lambda")
    )
