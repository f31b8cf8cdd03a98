"""DelegateToSubagent: start a child run for a delegated call and park the call on a task token;
and the child's side: its Finish (or failure) answers the parent's token.

The parent's record of the call (``child#<turn>#<call>`` in the parent's partition) holds the
latest task token and, once the child ends, its outcome. Both sides write it conditionally, so
whichever comes second finds the other: a re-parked call (a retried or resumed Delegate task)
whose child already finished takes the recorded outcome at once; a finishing child hands its
outcome to the token parked last. A token that is no longer waiting (its task attempt was retried)
is ignored: the attempt that replaced it parks a new token or takes the outcome.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from botocore.exceptions import ClientError

from longstep import clock, events, executions, faults, keys, pinning, runs_index
from longstep.errors import InvalidInputError, UnknownAgentError
from longstep.inputs import ParentLink, ToolCallItem, parse_model
from longstep.messages import tool_uses
from longstep.runtime import Runtime
from longstep.store import Condition, StepStore
from longstep.subagents import (
    CHILD_FAILED_ERROR,
    CHILD_PREFIX,
    SubagentArgs,
    SubagentLimits,
    child_key,
    child_run_id,
    child_script_uri,
)
from longstep.tasks.common import keep_for_wait, load_run, task_token, tool_use

RUNNING, DONE = "running", "done"
# A token whose task is closed or timed out: nothing waits on it any more.
# https://docs.aws.amazon.com/step-functions/latest/apireference/API_SendTaskSuccess.html (Errors)
_STALE_TOKEN_ERRORS = ("TaskTimedOut", "TaskDoesNotExist", "InvalidToken")
# Step Functions caps a task's output (and so SendTaskFailure's cause) at 256 KB; a short cause suffices.
MAX_CAUSE_CHARS = 4_000


def delegate(rt: Runtime, event: Any) -> dict[str, Any]:
    """DelegateToSubagent: start (or re-attach to) the child run of a delegated call, then wait.

    The input is the call's Map item, the task token, the state machine's ARN and the execution's
    name (the child is an execution of the same state machine, named by its run id: a second start
    is the same child).
    A call the limits refuse starts nothing: the refusal is handed to the token at once and CallTool
    tells the model.
    """
    token = task_token(event)
    item = parse_model(ToolCallItem, event.get("item"), "delegated call")
    state_machine_arn = event.get("state_machine_arn")
    if not isinstance(state_machine_arn, str) or not state_machine_arn:
        raise InvalidInputError("state_machine_arn: the state machine's ARN is required")
    use = tool_use(rt, item)
    parent = load_run(rt, item.run_id)
    name = use["name"]
    if name not in rt.resolve_agent(parent["agent"]).subagents:
        raise InvalidInputError(f"tool: {name!r} is not a subagent of agent {parent['agent']!r}")
    sk = child_key(item.turn, item.call)
    child_id = child_run_id(item.run_id, item.turn, item.call)
    sfn = rt.step_functions()
    base = {"run_id": item.run_id, "turn": item.turn, "call": item.call, "child_run_id": child_id}
    if rt.store.get(item.run_id, sk) is None:  # first attempt: may this child start at all?
        refusal = _refusal(rt, parent, item, name)
        if refusal is not None:
            sfn.send_task_success(taskToken=token, output=json.dumps({"refused": refusal}))
            return {**base, "status": "refused"}
    keep_for_wait(rt, item.run_id, parent, rt.settings.wait_timeouts.subagent)  # a no-op unless the turn planned less
    if not park(rt, sfn, item.run_id, sk, child_id, name, token):
        return {**base, "status": DONE}
    args = SubagentArgs.model_validate(use["input"])
    payload = {
        "run_id": child_id,
        "goal": args.child_goal(),
        "agent": name,
        "model": _child_model(parent["model"], use.get("toolUseId", "")),
        "parent": {"run_id": item.run_id, "turn": item.turn, "call": item.call, "depth": _depth(parent) + 1},
    }
    if parent.get("tenant"):  # the child's work is its parent's tenant's (its index, its budget)
        payload["tenant"] = parent["tenant"]
    if parent.get("deadline") is not None:  # the child cannot outlive its parent's deadline
        payload["deadline"] = dt.datetime.fromtimestamp(float(parent["deadline"]), dt.timezone.utc).isoformat()
    # Named like the child's run id, from the parent's first execution name (equal to the parent's
    # run id unless the run was started under another name): a rerun of a run id under a new
    # execution name does not find the closed children of the earlier one.
    execution = child_run_id(executions.first_name(str(event.get("execution_name") or item.run_id)), item.turn, item.call)
    # On the parent's version: a child keeps its parent's code while later deploys move the alias
    # (docs/deploy.md "Pinning"); the context's StateMachine.Id is not documented to name the version.
    version = pinning.running_version(sfn, state_machine_arn, str(event.get("execution_name") or item.run_id))
    start_child(sfn, version, execution, payload)
    rt.events.emit(item.run_id, events.CHILD_STARTED, turn=item.turn, call=item.call, child_run_id=child_id, agent=name)
    faults.reach(faults.CHILD_STARTED, item.run_id, item.turn, item.call)
    return {**base, "status": RUNNING}


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


def answer_parent(rt: Runtime, run: dict[str, Any], outcome: dict[str, Any], failed: bool = False) -> str | None:
    """A child run ended: record its outcome in the parent's record and hand it to the parked token.

    Safe to repeat (a retried Finish): the outcome is recorded once, and sending it again to a
    token that already took it is ignored.

    Returns:
        The parent's run id, or None when ``run`` is not a child run.
    """
    link = parent_link(run)
    if link is None:
        return None
    sk = child_key(int(link["turn"]), int(link["call"]))
    rt.store.update(
        link["run_id"],
        sk,
        {"status": DONE, "outcome": json.dumps(outcome), "failed": failed, "finished_at": clock.now()},
        when=Condition(exists=True, not_equal={"status": DONE}),
    )
    record = rt.store.get(link["run_id"], sk) or {}
    if record.get("task_token"):
        send_outcome(rt.step_functions(), record, record["task_token"])
    return str(link["run_id"])


def child_failed(rt: Runtime, event: Any) -> dict[str, Any]:
    """A child run is about to fail (a human aborted it at an escalation, or nobody answered one): tell its parent.

    The input is the failed state's input (a cursor, a tool call item, or Init's start input: each
    carries ``run_id``), with the caught error under ``error``. A child whose Init failed before
    its run record was written is linked to its parent by its start input's ``parent``.
    """
    if not isinstance(event, dict) or not isinstance(event.get("run_id"), str):
        raise InvalidInputError("run_id: the failing run's id is required")
    if rt.store.get(event["run_id"], keys.RUN_RECORD) is None and event.get("parent") is not None:
        run: dict[str, Any] = {"parent": parse_model(ParentLink, event["parent"], "start input's parent").model_dump()}
    else:
        run = load_run(rt, event["run_id"])
    error = event.get("error") if isinstance(event.get("error"), dict) else {}
    if error.get("Error") == "EscalationTimedOut":  # the state machine's Unanswered path
        cause = f"run {event['run_id']} failed: no human answered its escalation before it timed out"
    else:
        cause = f"run {event['run_id']} was aborted: {error.get('Error', 'a human aborted it at an escalation')}"
    parent = answer_parent(rt, run, {"run_id": event["run_id"], "status": "FAILED", "cause": cause}, failed=True)
    runs_index.on_status(rt.store, event["run_id"], runs_index.FAILED)  # the escalated step's error stays the run's error
    return {"run_id": event["run_id"], "parent": parent}


def parent_link(run: dict[str, Any]) -> dict[str, Any] | None:
    """The parent link of a run record (``longstep.inputs.ParentLink`` as a dict), or None."""
    raw = run.get("parent")
    if not raw:
        return None
    return json.loads(raw) if isinstance(raw, str) else dict(raw)


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


def _refusal(rt: Runtime, parent: dict[str, Any], item: ToolCallItem, name: str) -> str | None:
    """Why this call may not start a child (the deployment's limits, an undeployed agent), or None.

    The call's ordinal counts the children of earlier turns (their records are final) and the
    delegated calls before it in its own turn (read from the recorded reply), so every attempt
    of the call reaches the same answer.
    """
    try:
        rt.resolve_agent(name)
    except UnknownAgentError:
        return f"no agent named {name!r} is deployed to delegate to"
    agent = rt.resolve_agent(parent["agent"])
    earlier = sum(1 for r in rt.store.query_prefix(item.run_id, CHILD_PREFIX) if int(r["sk"][len(CHILD_PREFIX) :].split("#")[0]) < item.turn)
    reply = rt.store.get_step(item.run_id, keys.model_step_key(item.turn))
    uses = tool_uses(reply.result["message"]) if reply is not None else []
    same_turn = sum(1 for use in uses[: item.call] if use["name"] in agent.subagents)
    return SubagentLimits.from_env().refusal(_depth(parent), earlier + same_turn)


def _depth(run: dict[str, Any]) -> int:
    link = parent_link(run)
    return 0 if link is None else int(link["depth"])


def _child_model(parent_model: dict[str, Any], tool_use_id: str) -> dict[str, Any]:
    """The child's model choice: its own agent's settings, except that a scripted parent's child
    plays the script's ``children`` entry of the call (``longstep.subagents.child_script_uri``)."""
    if parent_model.get("provider") == "scripted" and parent_model.get("script_uri"):
        return {"provider": "scripted", "script_uri": child_script_uri(parent_model["script_uri"], tool_use_id)}
    return {}
