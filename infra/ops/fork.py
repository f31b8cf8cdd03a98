"""Fork a run at a turn: a new run that shares the first turns' records and goes on from there.

Useful to debug an agent from the turn it went wrong (a new goal, new code, another model): the
first ``at_turn`` turns are not run again (no model call, no tool call), and nothing of them is
copied. The fork's partition gets two small records: its run record and, at ``at_turn``, a
snapshot that holds no state but names the parent and the turn (``keys.FORKED_FROM``). A cold
load of the fork's context reads the parent's context at that turn from the parent's own
records (``longstep.context``), so stored bytes grow only by the fork's new turns; artifacts are
content-addressed, so an output the fork produces again is stored once. The parent is read, never
written.

The fork's tool calls are new calls (their idempotency keys name the fork): a keyed or
at-most-once tool acts again for the fork's turns, approvals are asked again.

A workflow run forks at a step (:func:`fork_workflow_run`): the fork's partition gets a copy of
the run record and of the first steps' records (small: an offloaded result is a reference to
its content-addressed object, which is not copied), so replay returns their recorded results and
runs nothing for them; the first step it executes is step ``at_step``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from typing import Callable

from longstep import clock, codec, context, keys
from longstep.contract.run import RunRecord
from longstep.errors import InvalidInputError, RunConflictError
from longstep.inputs import RUN_ID_PATTERN, RUN_ID_RULE, StartInput, parse_model
from longstep.pinning import unqualified
from longstep.store import AlreadyRecordedError, StepRecord, StepStore
from longstep.workflows import log as wf_log
from longstep_kit.ops import runs

# Run-record attributes a fork does not inherit: keys, expiry, the parent's snapshot pointers.
_NOT_INHERITED = {"pk", "sk", "expires_at", "schema_version", keys.SNAPSHOT_AT, keys.SNAPSHOT_WINDOWS, "created_at", keys.FORKED_FROM}


@dataclass(frozen=True)
class Fork:
    """A started fork.

    Attributes:
        run_id: the new run.
        parent: the run it was forked from.
        at_turn: the fork's first own turn; turns before it are the parent's.
        execution_arn: the fork's first execution.
    """

    run_id: str
    parent: str
    at_turn: int
    execution_arn: str


def fork_run(
    store: Any, artifacts: Any, sfn: Any, state_machine_arn: str, run_id: str, at_turn: int, *, new_run_id: str | None = None, goal: str | None = None
) -> Fork:
    """Create the fork's records and start its execution.

    Args:
        store: the checkpoint store.
        artifacts: the artifact store (the parent's snapshots may be there).
        sfn: a Step Functions client.
        state_machine_arn: the state machine to start the fork on.
        run_id: the run to fork.
        at_turn: the turns before this one are shared; the fork's model call is turn ``at_turn``.
        new_run_id: the fork's run id (default ``<run_id>-fork<at_turn>``).
        goal: a new goal (default the parent's).

    Raises:
        InvalidInputError: no such run, or ``at_turn`` is past the turns it completed.
        RunConflictError: a run called ``new_run_id`` exists.
    """
    parent = store.get(run_id, keys.RUN_RECORD)
    if parent is None:
        raise InvalidInputError(f"run_id: no run named {run_id!r}")
    complete = context.resume_point(store, artifacts, run_id, parent)
    if not 0 <= at_turn <= complete:
        raise InvalidInputError(f"at_turn: run {run_id} has {complete} complete turns (0-{complete - 1}); fork at 0 to {complete}")
    new_run_id = new_run_id or f"{run_id}-fork{at_turn}"
    payload = {**_original_input(sfn, state_machine_arn, run_id, parent), "run_id": new_run_id, **({"goal": goal} if goal else {})}
    payload.pop("generation", None)
    parse_model(StartInput, payload, "fork input")  # a bad new run id or goal fails before anything is written
    origin = json.dumps({"run_id": run_id, "at_turn": at_turn})
    record = {k: v for k, v in parent.items() if k not in _NOT_INHERITED}
    record.update(goal=payload["goal"], created_at=clock.now(), **{keys.FORKED_FROM: origin, keys.SNAPSHOT_AT: at_turn})
    try:
        store.put_once(new_run_id, keys.RUN_RECORD, record)
    except AlreadyRecordedError:
        raise RunConflictError(f"run_id: a run named {new_run_id!r} exists; pass another --run-id") from None
    store.put_once(new_run_id, keys.snapshot_key(at_turn), {keys.FORKED_FROM: origin})
    arn = sfn.start_execution(stateMachineArn=state_machine_arn, name=new_run_id, input=json.dumps(payload))["executionArn"]
    return Fork(run_id=new_run_id, parent=run_id, at_turn=at_turn, execution_arn=arn)


def lineage_steps(store: StepStore, run_id: str) -> list[StepRecord]:
    """Every recorded step of a run, a fork's shared turns (read from its parents) included."""
    origin = RunRecord.from_dict(store.get(run_id, keys.RUN_RECORD) or {}).outputs.forked_from
    own = store.steps(run_id)
    if origin is None:
        return own
    high = keys.turn_key(int(origin["at_turn"]))
    inherited = [s for s in lineage_steps(store, origin["run_id"]) if s.sk < high]
    return inherited + own


def _original_input(sfn: Any, state_machine_arn: str, run_id: str, parent: dict[str, Any]) -> dict[str, Any]:
    """The parent's start input (its model choice, user and limits), else one rebuilt from its record."""
    executions = runs.run_executions(sfn, unqualified(state_machine_arn), run_id)  # oldest first: the run's start
    if executions:
        return json.loads(sfn.describe_execution(executionArn=executions[0]["executionArn"])["input"])
    record = RunRecord.of(parent)
    return {"goal": record.goal, "agent": record.agent, "max_turns": int(record.max_turns or 0), "model": record.model}


# What a copied record does not carry over: its keys and expiry (the store writes them anew).
_RECORD_KEYS = {"pk", "sk", "expires_at", "schema_version"}


@dataclass(frozen=True)
class WorkflowFork:
    """A started fork of a workflow run.

    Attributes:
        run_id: the new run.
        parent: the run it was forked from.
        workflow: the workflow both run.
        at_step: the position of the first context call the fork executes (from 1).
        execution_arn: the fork's first execution.
    """

    run_id: str
    parent: str
    workflow: str
    at_step: int
    execution_arn: str


def fork_workflow_run(
    store: Any, sfn: Any, state_machine_arn_of: Callable[[str], str], run_id: str, at_step: int, *, new_run_id: str | None = None
) -> WorkflowFork:
    """Copy a workflow run's first ``at_step`` step records into a new run and start it.

    Args:
        store: the checkpoint store.
        sfn: a Step Functions client.
        state_machine_arn_of: the state machine to start a workflow's run on, by workflow name.
        run_id: the workflow run to fork.
        at_step: the position (from 1, as ``NonDeterminismError`` counts context calls) of the
            first call the fork executes; the calls before it return the parent's results.
        new_run_id: the fork's run id (default ``<run_id>-fork<at_step>``).

    Raises:
        InvalidInputError: no such workflow run, ``at_step`` past its recorded steps, or a bad run id.
        RunConflictError: a run called ``new_run_id`` exists.
    """
    parent = store.get(run_id, wf_log.RUN)
    if parent is None:
        raise InvalidInputError(f"run_id: no workflow run named {run_id!r}")
    steps = store.query_prefix(run_id, wf_log.STEP_PREFIX)
    recorded = _contiguous({wf_log.parse_step_key(item["sk"])[0] for item in steps})
    if not 1 <= at_step <= recorded + 1:
        raise InvalidInputError(f"at_step: run {run_id} has {recorded} recorded steps (positions 1-{recorded}); fork at 1 to {recorded + 1}")
    new_run_id = new_run_id or f"{run_id}-fork{at_step}"
    if not RUN_ID_PATTERN.fullmatch(new_run_id):
        raise InvalidInputError(f"run_id: {new_run_id!r} {RUN_ID_RULE}")
    workflow = parent["workflow"]
    arn = state_machine_arn_of(workflow)
    payload = _workflow_input(sfn, arn, run_id, parent)
    payload.update(run_id=new_run_id)
    origin = json.dumps({"run_id": run_id, "at_step": at_step})
    record = {k: v for k, v in parent.items() if k not in _RECORD_KEYS}
    record.update(started_at=clock.now(), **{keys.FORKED_FROM: origin})
    try:
        store.put_once(new_run_id, wf_log.RUN, record)
    except AlreadyRecordedError:
        raise RunConflictError(f"run_id: a run named {new_run_id!r} exists; pass another --run-id") from None
    for item in steps:
        if wf_log.parse_step_key(item["sk"])[0] < at_step:
            store.put_once(new_run_id, item["sk"], {k: v for k, v in item.items() if k not in _RECORD_KEYS})
    execution = sfn.start_execution(stateMachineArn=arn, name=new_run_id, input=json.dumps(payload))["executionArn"]
    return WorkflowFork(run_id=new_run_id, parent=run_id, workflow=workflow, at_step=at_step, execution_arn=execution)


def _contiguous(seqs: set[int]) -> int:
    """How many steps from position 1 on are recorded without a gap."""
    count = 0
    while count + 1 in seqs:
        count += 1
    return count


def _workflow_input(sfn: Any, state_machine_arn: str, run_id: str, parent: dict[str, Any]) -> dict[str, Any]:
    """The workflow run's start input (its settings included), else one rebuilt from its record."""
    executions = runs.run_executions(sfn, unqualified(state_machine_arn), run_id)
    if executions:
        started = json.loads(sfn.describe_execution(executionArn=executions[0]["executionArn"])["input"])
        return {k: v for k, v in started.items() if k in ("workflow", "input", "passes_per_execution")}
    return {"workflow": parent["workflow"], "input": codec.decode_json("input", parent)}
