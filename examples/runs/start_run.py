"""Start a run from Python: one Step Functions execution, named after the run."""

import json

import boto3


def start_run(state_machine_arn: str, run_id: str, goal: str, agent: str = "triage", sfn=None) -> str:
    """Start the run ``run_id`` and return its execution ARN."""
    sfn = sfn or boto3.client("stepfunctions")
    response = sfn.start_execution(
        stateMachineArn=state_machine_arn,
        name=run_id,  # the execution name is the run id
        input=json.dumps({"run_id": run_id, "goal": goal, "agent": agent}),
    )
    return response["executionArn"]
