"""Starting and resuming runs: the calls a CLI or an application makes to Step Functions."""

from __future__ import annotations

from typing import Any

from longstep.errors import LongstepError

RESUME_SUFFIX = "-resume-"


class RunStillRunningError(LongstepError):
    """The run's execution is still running: there is nothing to resume."""


def execution_arn(state_machine_arn: str, name: str) -> str:
    """The ARN of the execution called ``name`` of a state machine."""
    return state_machine_arn.replace(":stateMachine:", ":execution:") + f":{name}"


def run_executions(sfn: Any, state_machine_arn: str, run_id: str) -> list[dict[str, Any]]:
    """Every execution named ``run_id`` or a resume of it (a suffix is added), oldest first."""
    found = []
    kwargs: dict[str, Any] = {"stateMachineArn": state_machine_arn, "maxResults": 1000}
    while True:
        page = sfn.list_executions(**kwargs)
        found.extend(e for e in page["executions"] if e["name"] == run_id or e["name"].startswith(run_id + RESUME_SUFFIX))
        if not page.get("nextToken"):
            break
        kwargs["nextToken"] = page["nextToken"]
    return sorted(found, key=lambda e: e["startDate"])


def resume(sfn: Any, state_machine_arn: str, run_id: str) -> str:
    """Start a new execution of ``run_id`` with its original input; it replays what is recorded.

    Args:
        sfn: a Step Functions client.
        state_machine_arn: the state machine the run was started on.
        run_id: the run, which is also its first execution's name (or that name's prefix).

    Returns:
        The new execution's ARN.

    Raises:
        RunStillRunningError: an execution of the run is still running.
    """
    executions = run_executions(sfn, state_machine_arn, run_id)
    if not executions:
        raise LongstepError(f"run_id: no execution named {run_id!r} on {state_machine_arn}")
    running = [e for e in executions if e["status"] == "RUNNING"]
    if running:
        raise RunStillRunningError(f"run {run_id} is still running ({running[-1]['name']})")
    original = sfn.describe_execution(executionArn=executions[0]["executionArn"])
    name = f"{run_id}{RESUME_SUFFIX}{len(executions)}"
    return sfn.start_execution(stateMachineArn=state_machine_arn, name=name, input=original["input"])["executionArn"]
