"""DelegateToSubagent: start a child run for a delegated call and park the call on a task token
(the child's side, its end answering the token: ``longstep.child_runs``)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from longstep import events, executions, faults, keys, pinning
from longstep.child_runs import DONE, RUNNING, park, start_child
from longstep.contract.run import RunRecord
from longstep.errors import InvalidInputError, UnknownAgentError
from longstep.inputs import parse_model, task_token
from longstep.contract.call import CallItem
from longstep.messages import tool_uses
from longstep.contract.steps import ParkedOutput
from longstep.runtime import Runtime
from longstep.subagents import CHILD_PREFIX, SubagentArgs, SubagentLimits, child_key, child_run_id, child_script_uri
from longstep.tasks.common import keep_for_wait, load_run, tool_use


def delegate(rt: Runtime, event: Any) -> ParkedOutput:
    """DelegateToSubagent: start (or re-attach to) the child run of a delegated call, then wait.

    The input is the call's Map item, the task token, the state machine's ARN and the execution's
    name (the child is an execution of the same state machine, named by its run id: a second start
    is the same child).
    A call the limits refuse starts nothing: the refusal is handed to the token at once and CallTool
    tells the model.
    """
    token = task_token(event)
    item = parse_model(CallItem, event.get("item"), "delegated call")
    state_machine_arn = event.get("state_machine_arn")
    if not isinstance(state_machine_arn, str) or not state_machine_arn:
        raise InvalidInputError("state_machine_arn: the state machine's ARN is required")
    use = tool_use(rt, item)
    parent = load_run(rt, item.run_id)
    name = use["name"]
    if name not in rt.resolve_agent(parent.agent).subagents:
        raise InvalidInputError(f"tool: {name!r} is not a subagent of agent {parent.agent!r}")
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
        "model": _child_model(parent.model, use.get("toolUseId", "")),
        "parent": {"run_id": item.run_id, "turn": item.turn, "call": item.call, "depth": _depth(parent) + 1},
    }
    if parent.tenant:  # the child's work is its parent's tenant's (its index, its budget)
        payload["tenant"] = parent.tenant
    if parent.deadline is not None:  # the child cannot outlive its parent's deadline
        payload["deadline"] = dt.datetime.fromtimestamp(parent.deadline, dt.timezone.utc).isoformat()
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


def _refusal(rt: Runtime, parent: RunRecord, item: CallItem, name: str) -> str | None:
    """Why this call may not start a child (the deployment's limits, an undeployed agent), or None.

    The call's ordinal counts the children of earlier turns (their records are final) and the
    delegated calls before it in its own turn (read from the recorded reply), so every attempt
    of the call reaches the same answer.
    """
    try:
        rt.resolve_agent(name)
    except UnknownAgentError:
        return f"no agent named {name!r} is deployed to delegate to"
    agent = rt.resolve_agent(parent.agent)
    earlier = sum(1 for r in rt.store.query_prefix(item.run_id, CHILD_PREFIX) if int(r["sk"][len(CHILD_PREFIX) :].split("#")[0]) < item.turn)
    reply = rt.store.get_step(item.run_id, keys.model_step_key(item.turn))
    uses = tool_uses(reply.result["message"]) if reply is not None else []
    same_turn = sum(1 for use in uses[: item.call] if use["name"] in agent.subagents)
    return SubagentLimits.from_env().refusal(_depth(parent), earlier + same_turn)


def _depth(run: RunRecord) -> int:
    return 0 if run.parent is None else run.parent.depth


def _child_model(parent_model: dict[str, Any], tool_use_id: str) -> dict[str, Any]:
    """The child's model choice: its own agent's settings, except that a scripted parent's child
    plays the script's ``children`` entry of the call (``longstep.subagents.child_script_uri``)."""
    if parent_model.get("provider") == "scripted" and parent_model.get("script_uri"):
        return {"provider": "scripted", "script_uri": child_script_uri(parent_model["script_uri"], tool_use_id)}
    return {}
