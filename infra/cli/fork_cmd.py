"""``longstep fork RUN --at-turn N [--goal ...] [--run-id NEW]``: a new run that shares the first
N turns of RUN (no model or tool call for them, nothing copied) and goes on from turn N.
``longstep fork RUN --at-step N [--run-id NEW]``: the same for a workflow run, from its step N."""

from __future__ import annotations

import argparse
import json
from typing import Any


def cmd_fork(args: argparse.Namespace) -> int:
    from longstep.store import CheckpointStore

    store = CheckpointStore(_output(args, "CheckpointTableName"), args.aws.client("dynamodb"))
    if args.at_step is not None:
        return _fork_workflow(args, store)
    from longstep.artifacts import ArtifactStore
    from longstep.pinning import alias_arn
    from longstep_kit.ops.fork import fork_run

    artifacts = ArtifactStore(_output(args, "ArtifactBucketName"), args.aws.client("s3"))
    # On the deploy alias, as `longstep start`: the fork keeps this deploy's code (docs/deploy.md "Pinning").
    arn = args.state_machine_arn or alias_arn(_output(args, "StateMachineArn"))
    fork = fork_run(store, artifacts, args.aws.client("stepfunctions"), arn, args.run_id, args.at_turn, new_run_id=args.new_run_id, goal=args.goal)
    if args.output == "json":
        print(json.dumps({"run_id": fork.run_id, "forked_from": fork.parent, "at_turn": fork.at_turn, "execution_arn": fork.execution_arn}))
    else:
        print(f"run {fork.run_id}: forked from {fork.parent} at turn {fork.at_turn} (turns 0-{fork.at_turn - 1} shared)")
        print(fork.execution_arn)
    return 0


def _fork_workflow(args: argparse.Namespace, store: Any) -> int:
    from longstep.errors import InvalidInputError
    from longstep.pinning import alias_arn
    from longstep_kit.config import workflow_output_name
    from longstep_kit.ops.fork import fork_workflow_run

    if args.goal is not None:
        raise InvalidInputError("--goal: a workflow run has no goal to change (it forks with its input)")

    def state_machine_arn_of(workflow: str) -> str:
        # On the workflow's deploy alias, as its runs start (docs/deploy.md "Pinning").
        return args.state_machine_arn or alias_arn(_output(args, workflow_output_name(workflow)))

    fork = fork_workflow_run(store, args.aws.client("stepfunctions"), state_machine_arn_of, args.run_id, args.at_step, new_run_id=args.new_run_id)
    if args.output == "json":
        print(
            json.dumps(
                {
                    "run_id": fork.run_id,
                    "forked_from": fork.parent,
                    "workflow": fork.workflow,
                    "at_step": fork.at_step,
                    "execution_arn": fork.execution_arn,
                }
            )
        )
    else:
        print(
            f"run {fork.run_id}: workflow {fork.workflow} forked from {fork.parent} at step {fork.at_step} (positions 1-{fork.at_step - 1} replayed)"
        )
        print(fork.execution_arn)
    return 0


def _output(args: argparse.Namespace, name: str) -> str:
    from longstep_kit.cli.aws_cmds import stack_output

    return stack_output(args, name)


def register(sub: Any) -> None:
    fork = sub.add_parser("fork", help="start a new run that shares a run's first N turns (or a workflow run's first N steps)")
    fork.add_argument("run_id", metavar="RUN")
    at = fork.add_mutually_exclusive_group(required=True)
    at.add_argument("--at-turn", type=int, help="an agent run: the fork's first own turn; turns before it are shared")
    at.add_argument("--at-step", type=int, help="a workflow run: the position (from 1) of the first step the fork executes; earlier steps replay")
    fork.add_argument("--goal", help="the fork's goal (default: the run's; agent runs only)")
    fork.add_argument("--run-id", dest="new_run_id", help="the fork's run id (default RUN-fork<N>)")
    fork.add_argument("--stack", default="Longstep", help="deployed stack name (default Longstep)")
    fork.add_argument("--state-machine-arn", help="use this state machine instead of the stack's")
    fork.set_defaults(func=cmd_fork)
