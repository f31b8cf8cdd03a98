"""Child runs, both sides: a delegating call parks its task token in the parent's record of the
child (``child#<turn>#<call>`` in the parent's partition), and the child's end (its Finish, or a
failure) records its outcome there and answers the parked token. The tasks DelegateToSubagent,
ChildFailed and Finish use these, and so does a workflow's ``ctx.agent``
(``longstep.workflows.children``).

Both sides write the record conditionally, so whichever comes second finds the other: a re-parked
call (a retried or resumed Delegate task) whose child already finished takes the recorded outcome
at once; a finishing child hands its outcome to the token parked last. A token that is no longer
waiting (its task attempt was retried) is ignored: the attempt that replaced it parks a new token
or takes the outcome.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from botocore.exceptions import ClientError

from longstep import clock
from longstep.contract.run import RunRecord
from longstep.runtime import Runtime
from longstep.store import Condition, StepStore
from longstep.subagents import CHILD_FAILED_ERROR, CHILD_PREFIX, child_key

RUNNING, DONE = "running", "done"
# A token whose task is closed or timed out: nothing waits on it any more.
# https://docs.aws.amazon.com/step-functions/latest/apireference/API_SendTaskSuccess.html (Errors)
_STALE_TOKEN_ERRORS = ("TaskTimedOut", "TaskDoesNotExist", "InvalidToken")
# Step Functions caps a task's output (and so SendTaskFailure's cause) at 256 KB; a short cause suffices.
MAX_CAUSE_CHARS = 4_000


def park(rt: Runtime, sfn: Any, run_id: str, sk: str, child_run: str, agent: str, token: str) -> bool:
    """Park a delegating call's task token in the parent's record ``sk`` of its child run.

    Returns:
        False when the child ended before this attempt parked (a retried task): its recorded
        outcome has been handed to ``token`` at once, and nothing is to start.
    """
    parked = rt.store.update(
        run_id,
        sk,
        {"child_run_id": child_run, "subagent": agent, "status": RUNNING, "task_token": token, "parked_at": clock.now()},
        when=Condition(not_equal={"status": DONE}),
        expires=True,  # like every record of the run (it had no TTL at all before: kept forever)
    )
    if parked is None:
        send_outcome(sfn, rt.store.get(run_id, sk) or {}, token)
        return False
    return True


def start_child(sfn: Any, state_machine_arn: str, execution: str, payload: dict[str, Any]) -> None:
    """Start the child run's execution; one an earlier attempt started (same name) is the same child."""
    try:
        sfn.start_execution(stateMachineArn=state_machine_arn, name=execution, input=json.dumps(payload, sort_keys=True))
    except sfn.exceptions.ExecutionAlreadyExists:
        # Started by an earlier attempt of this call (the same name is the same child): re-attach.
        # https://docs.aws.amazon.com/step-functions/latest/apireference/API_StartExecution.html
        pass


def answer_parent(rt: Runtime, run: RunRecord | Mapping[str, Any], outcome: dict[str, Any], failed: bool = False) -> str | None:
    """A child run ended: record its outcome in the parent's record and hand it to the parked token.

    Safe to repeat (a retried Finish): the outcome is recorded once, and sending it again to a
    token that already took it is ignored.

    Returns:
        The parent's run id, or None when ``run`` is not a child run.
    """
    link = RunRecord.of(run).parent
    if link is None:
        return None
    sk = child_key(link.turn, link.call)
    rt.store.update(
        link.run_id,
        sk,
        {"status": DONE, "outcome": json.dumps(outcome), "failed": failed, "finished_at": clock.now()},
        when=Condition(exists=True, not_equal={"status": DONE}),
    )
    record = rt.store.get(link.run_id, sk) or {}
    if record.get("task_token"):
        send_outcome(rt.step_functions(), record, record["task_token"])
    return link.run_id


def children(store: StepStore, run_id: str) -> list[dict[str, Any]]:
    """The child runs a run started: turn, call, subagent, child run id and status (no tokens)."""
    out = []
    for record in store.query_prefix(run_id, CHILD_PREFIX):
        turn, call = record["sk"][len(CHILD_PREFIX) :].split("#")
        out.append(
            {
                "turn": int(turn),
                "call": int(call),
                "subagent": record.get("subagent"),
                "child_run_id": record.get("child_run_id"),
                "status": ("failed" if record.get("failed") else "succeeded") if record.get("status") == DONE else RUNNING,
            }
        )
    return out


def send_outcome(sfn: Any, record: dict[str, Any], token: str) -> None:
    """Send a recorded outcome to ``token``: success with the child's output, or its failure."""
    outcome = json.loads(record.get("outcome") or "{}")
    try:
        if record.get("failed"):
            sfn.send_task_failure(taskToken=token, error=CHILD_FAILED_ERROR, cause=str(outcome.get("cause", ""))[:MAX_CAUSE_CHARS])
        else:
            sfn.send_task_success(taskToken=token, output=json.dumps(outcome))
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") not in _STALE_TOKEN_ERRORS:
            raise
