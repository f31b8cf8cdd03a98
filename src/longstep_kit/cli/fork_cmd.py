"""``longstep fork RUN --at-turn N [--goal ...] [--run-id NEW]``: a new run that shares the first
N turns of RUN (no model or tool call for them, nothing copied) and goes on from turn N."""

from __future__ import annotations

import argparse
import json
from typing import Any


def cmd_fork(args: argparse.Namespace) -> int:
    from longstep.artifacts import ArtifactStore
    from longstep.store import CheckpointStore
    from longstep_kit.cli.aws_cmds import stack_output
    from longstep_kit.ops.fork import fork_run

    store = CheckpointStore(stack_output(args, "CheckpointTableName"), args.aws.client("dynamodb"))
    artifacts = ArtifactStore(stack_output(args, "ArtifactBucketName"), args.aws.client("s3"))
    arn = args.state_machine_arn or stack_output(args, "StateMachineArn")
    fork = fork_run(store, artifacts, args.aws.client("stepfunctions"), arn, args.run_id, args.at_turn, new_run_id=args.new_run_id, goal=args.goal)
    if args.output == "json":
        print(json.dumps({"run_id": fork.run_id, "forked_from": fork.parent, "at_turn": fork.at_turn, "execution_arn": fork.execution_arn}))
    else:
        print(f"run {fork.run_id}: forked from {fork.parent} at turn {fork.at_turn} (turns 0-{fork.at_turn - 1} shared)")
        print(fork.execution_arn)
    return 0


def register(sub: Any) -> None:
    fork = sub.add_parser("fork", help="start a new run that shares a run's first N turns and goes on from turn N")
    fork.add_argument("run_id", metavar="RUN")
    fork.add_argument("--at-turn", type=int, required=True, help="the fork's first own turn; turns before it are shared")
    fork.add_argument("--goal", help="the fork's goal (default: the run's)")
    fork.add_argument("--run-id", dest="new_run_id", help="the fork's run id (default RUN-fork<N>)")
    fork.add_argument("--stack", default="Longstep", help="deployed stack name (default Longstep)")
    fork.add_argument("--state-machine-arn", help="use this state machine instead of the stack's")
    fork.set_defaults(func=cmd_fork)
