"""Start a run from Python: one Step Functions execution, named after the run, on the deploy alias."""

import json

import boto3


def start_run(state_machine_arn: str, run_id: str, goal: str, agent: str = "triage", sfn=None) -> str:
    """Start the run ``run_id`` and return its execution ARN.

    ``state_machine_arn`` is the stack's ``StateMachineArn`` output; the run starts on its alias
    ``live`` so that it keeps this deploy's code while later deploys happen (docs/deploy.md).
    """
    sfn = sfn or boto3.client("stepfunctions")
    response = sfn.start_execution(
        stateMachineArn=f"{state_machine_arn}:live",  # the deploy alias: the run is pinned to its version
        name=run_id,  # the execution name is the run id
        input=json.dumps({"run_id": run_id, "goal": goal, "agent": agent}),
    )
    return response["executionArn"]
