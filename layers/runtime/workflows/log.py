"""Where a workflow run's records live in the checkpoint table, and the directives the state
machine routes on.

A workflow run is a partition of the checkpoint table like an agent run, with its own record
family under ``wf#`` so that no agent code (which parses ``step#`` keys) ever meets it:

- ``wf#run``: the run (workflow name, input, started_at), written once.
- ``wf#step#<seq>``: the result of the ``seq``-th context call (a step, a wait's outcome, a
  ``now()``), with its kind and name, written once (``StepStore.record_step``).
- ``wf#step#<seq>#<branch>``: one branch of a ``ctx.parallel`` call.
- ``wf#intent#<seq>[#<branch>]``: the intent marker of an at-most-once step.
- ``wf#final``: the run's output or failure, written once.
- ``child#<seq>#000``: a ``ctx.agent`` call's child agent run (its parked task token, then its
  outcome), the record a subagent call has in an agent's partition (``longstep.subagents``).
"""

from __future__ import annotations

from typing import Any

from longstep.errors import InvalidInputError
from longstep.inputs import RUN_ID_PATTERN, RUN_ID_RULE

PREFIX = "wf#"
RUN = f"{PREFIX}run"
FINAL = f"{PREFIX}final"
STEP_PREFIX = f"{PREFIX}step#"
INTENT_PREFIX = f"{PREFIX}intent#"

# Kinds of recorded context calls: what replay checks besides the name.
STEP, PARALLEL, APPROVAL, EVENT, SLEEP, TIMER, NOW, RANDOM, UUID, AGENT = (
    "step",
    "parallel",
    "approval",
    "event",
    "sleep",
    "timer",
    "now",
    "random",
    "uuid",
    "agent",
)

# Directives: what an invocation returns in ``next``, and the state machine's Choice routes on.
CONTINUE, WAIT, APPROVE, SIGNAL, DONE, FAILED = "continue", "wait", "approval", "event", "done", "failed"
CONTINUE_AS_NEW = "continue_as_new"
DELEGATE = "delegate"  # a child agent run: the Delegate task starts it and parks on a task token


def step_key(seq: int, branch: int | None = None) -> str:
    """Sort key of the ``seq``-th recorded call (``branch``: one branch of a parallel call)."""
    return f"{STEP_PREFIX}{seq:06d}" + ("" if branch is None else f"#{branch:03d}")


def intent_key(seq: int, branch: int | None = None) -> str:
    """Sort key of the intent marker of an at-most-once step."""
    return f"{INTENT_PREFIX}{seq:06d}" + ("" if branch is None else f"#{branch:03d}")


def parse_step_key(sk: str) -> tuple[int, int | None]:
    """``(seq, branch)`` of a ``step_key`` (branch None for a top-level call).

    Raises:
        ValueError: not a workflow step key.
    """
    if not sk.startswith(STEP_PREFIX):
        raise ValueError(f"sk: {sk!r} is not a workflow step key")
    parts = sk[len(STEP_PREFIX) :].split("#")
    return int(parts[0]), (int(parts[1]) if len(parts) > 1 else None)


def start_fields(event: Any) -> tuple[str, str, dict[str, Any]]:
    """``run_id``, ``workflow`` and ``input`` of a state, checked (InvalidInputError names the field)."""
    if not isinstance(event, dict):
        raise InvalidInputError("event: expected an object with run_id and workflow")
    run_id, name, workflow_input = event.get("run_id"), event.get("workflow"), event.get("input", {})
    if not isinstance(run_id, str) or not RUN_ID_PATTERN.fullmatch(run_id):
        raise InvalidInputError(f"run_id: {RUN_ID_RULE}")
    if not isinstance(name, str) or not name:
        raise InvalidInputError("workflow: the workflow's name is required")
    if not isinstance(workflow_input, dict):
        raise InvalidInputError("input: the workflow's input must be a JSON object")
    if not isinstance(event.get("model", {}), dict):
        raise InvalidInputError("model: the model choice of the run's agent steps must be a JSON object")
    return run_id, name, workflow_input
