"""Starting and resuming runs: the calls a CLI or an application makes to Step Functions."""

from __future__ import annotations

import json
from typing import Any

from longstep.errors import LongstepError
from longstep.executions import GENERATION_SUFFIX, first_name, generation_name


class RunStillRunningError(LongstepError):
    """The run's execution is still running: there is nothing to resume."""


class RunFinishedError(LongstepError):
    """The run's latest execution succeeded: resuming it would only replay a finished run."""


class RunNotFoundError(LongstepError):
    """No execution of the run exists on the state machine."""


def latest_execution(sfn: Any, state_machine_arn: str, run_id: str) -> dict[str, Any]:
    """The run's newest execution (after continue-as-new and resumes, not its first).

    Raises:
        RunNotFoundError: the run has no execution on this state machine.
    """
    executions = run_executions(sfn, state_machine_arn, run_id)
    if not executions:
        raise RunNotFoundError(f"run_id: no execution named {run_id!r} on {state_machine_arn}")
    return executions[-1]


def run_executions(sfn: Any, state_machine_arn: str, run_id: str) -> list[dict[str, Any]]:
    """Every execution of ``run_id`` (its generations: ``run_id``, ``run_id--g1``...), oldest first."""
    found = []
    kwargs: dict[str, Any] = {"stateMachineArn": state_machine_arn, "maxResults": 1000}
    while True:
        page = sfn.list_executions(**kwargs)
        found.extend(e for e in page["executions"] if _belongs(e["name"], run_id))
        if not page.get("nextToken"):
            break
        kwargs["nextToken"] = page["nextToken"]
    return sorted(found, key=lambda e: (generation_of(e["name"]), e["startDate"]))


def generation_of(execution_name: str) -> int:
    """The generation an execution's name says (0 for the run's first execution).

    Executions are ordered by it, not by their start dates alone: on the local stack's virtual
    clock a continuation starts at the instant its predecessor ended (time stands still while a
    handler runs), and a run on a rewound clock starts earlier than the one before it.
    """
    base = first_name(execution_name)
    return 0 if base == execution_name else int(execution_name[len(base) :].removeprefix(GENERATION_SUFFIX))


def _belongs(name: str, run_id: str) -> bool:
    return first_name(name) == run_id


def resume(sfn: Any, state_machine_arn: str, run_id: str, force: bool = False) -> str:
    """Start a new execution of ``run_id`` with its original input; it replays what is recorded.

    Args:
        sfn: a Step Functions client.
        state_machine_arn: the state machine the run was started on.
        run_id: the run, which is also its first execution's name (or that name's prefix).
        force: resume even when the latest execution succeeded.

    Returns:
        The new execution's ARN.

    Raises:
        RunStillRunningError: an execution of the run is still running.
        RunFinishedError: the latest execution succeeded and ``force`` is not set.
        RunNotFoundError: the run has no execution here.
    """
    executions = run_executions(sfn, state_machine_arn, run_id)
    if not executions:
        raise RunNotFoundError(f"run_id: no execution named {run_id!r} on {state_machine_arn}")
    running = [e for e in executions if e["status"] == "RUNNING"]
    if running:
        raise RunStillRunningError(f"run {run_id} is still running ({running[-1]['name']})")
    if executions[-1]["status"] == "SUCCEEDED" and not force:
        raise RunFinishedError(f"run {run_id} already succeeded ({executions[-1]['name']}); pass --force to replay it in a new execution")
    original = json.loads(sfn.describe_execution(executionArn=executions[0]["executionArn"])["input"])
    # Every execution of a run is a generation: the next one gets the next number and name.
    generation = len(executions)
    payload = {**original, "generation": generation}
    name = generation_name(executions[0]["name"], generation)
    # A pinned run resumes on the version its last execution ran (docs/deploy.md "Pinning").
    latest = sfn.describe_execution(executionArn=executions[-1]["executionArn"])
    target = latest.get("stateMachineVersionArn") or state_machine_arn
    return sfn.start_execution(stateMachineArn=target, name=name, input=json.dumps(payload))["executionArn"]
