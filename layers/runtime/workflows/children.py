"""``ctx.agent``: a workflow hands a task to an agent, as a child agent run.

The machinery is the subagents' (``longstep.subagents``, ``longstep.child_runs``): the
workflow's Delegate task starts an execution of the agent state machine and parks on a task
token; the child's Finish (or ChildFailed, when a human aborts it) records its outcome in the
parent's ``child#<seq>#000`` record and answers the token. The parent link a child carries is
``{run_id: <workflow run>, turn: <position>, call: 0}``: to ``answer_parent`` a workflow's
position is an agent's turn.

The child's run id and execution name are derived from the workflow's run and the call's
position (``<run>-s<seq>``): a retried Delegate, a crashed pass or a new execution of the run
starts no second child (a start under a name already taken is the same child).
"""

from __future__ import annotations

import json
from typing import Any

from longstep import environment, executions, faults
from longstep.errors import InvalidInputError, UnknownAgentError
from longstep.runtime import Runtime
from longstep.settings import ENV_AGENT_STATE_MACHINE  # the agent state machine (alias ``live``) its children run on
from longstep.subagents import SubagentArgs, child_key, child_script_uri, derived_run_id
from longstep.child_runs import DONE, RUNNING, park, start_child

# A workflow run is the root of its tree: its children are at depth 1.
CHILD_DEPTH = 1


def child_id(run_id: str, seq: int) -> str:
    """The run id of the child agent run of the ``ctx.agent`` call at position ``seq``."""
    return derived_run_id(run_id, f"-s{seq}")


def script_key(seq: int) -> str:
    """The key of a scripted child's script in the workflow's script's ``children`` (``s<seq>``)."""
    return f"s{seq}"


def delegate(rt: Runtime, token: str, run_id: str, state: dict[str, Any], execution_name: str | None) -> dict[str, Any]:
    """The Delegate task: start (or re-attach to) the child agent run of the call the state's
    directive names, and park its task token in the workflow's record of the call.

    A child that ended before this attempt parked (a retried task) hands its recorded outcome to
    the new token at once; an agent that is not deployed starts nothing and is refused at once.
    """
    directive = state.get("directive") or {}
    seq, name = directive.get("seq"), directive.get("agent")
    if not isinstance(seq, int) or seq < 1 or not isinstance(name, str):
        raise InvalidInputError("state.directive: the position and agent of a ctx.agent call are required")
    arn = environment.get(ENV_AGENT_STATE_MACHINE)
    if not arn:
        raise InvalidInputError(f"environment variable {ENV_AGENT_STATE_MACHINE}: no agent state machine is deployed beside the workflow")
    sk = child_key(seq, 0)
    child = child_id(run_id, seq)
    sfn = rt.step_functions()
    base = {"run_id": run_id, "seq": seq, "agent": name, "child_run_id": child}
    if rt.store.get(run_id, sk) is None:  # first attempt: is there such an agent?
        try:
            rt.resolve_agent(name)
        except UnknownAgentError:
            sfn.send_task_success(taskToken=token, output=json.dumps({"refused": f"no agent named {name!r} is deployed"}))
            return {**base, "status": "refused"}
    if not park(rt, sfn, run_id, sk, child, name, token):  # the child ended first: its outcome is handed over
        return {**base, "status": DONE}
    args = SubagentArgs(goal=str(directive.get("goal") or ""), inputs=directive.get("inputs") or {})
    payload = {
        "run_id": child,
        "goal": args.child_goal(),
        "agent": name,
        "model": _child_model(state.get("model") or {}, seq),
        "parent": {"run_id": run_id, "turn": seq, "call": 0, "depth": CHILD_DEPTH},
    }
    # Named from the workflow's first execution name, as a subagent is from its parent's.
    execution = child_id(executions.first_name(execution_name or run_id), seq)
    start_child(sfn, arn, execution, payload)
    faults.reach(faults.CHILD_STARTED, run_id, seq, 0)
    return {**base, "status": RUNNING}


def _child_model(model: dict[str, Any], seq: int) -> dict[str, Any]:
    """The child's model choice: its agent's own settings, except that a workflow run started with
    a scripted model plays its script's ``children["s<seq>"]`` entry."""
    if model.get("provider") == "scripted" and model.get("script_uri"):
        return {"provider": "scripted", "script_uri": child_script_uri(model["script_uri"], script_key(seq))}
    return {}


__all__ = ["CHILD_DEPTH", "ENV_AGENT_STATE_MACHINE", "child_id", "delegate", "script_key"]
