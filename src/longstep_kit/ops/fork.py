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
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from longstep import clock, context, keys
from longstep.errors import InvalidInputError, RunConflictError
from longstep.inputs import StartInput, parse_model
from longstep.store import AlreadyRecordedError, StepRecord, StepStore
from longstep_kit.ops import runs

# Run-record attributes a fork does not inherit: keys, expiry, the parent's snapshot pointer.
_NOT_INHERITED = {"pk", "sk", "expires_at", "schema_version", keys.SNAPSHOT_AT, "created_at", keys.FORKED_FROM}


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
    record = store.get(run_id, keys.RUN_RECORD) or {}
    own = store.steps(run_id)
    if keys.FORKED_FROM not in record:
        return own
    origin = json.loads(record[keys.FORKED_FROM])
    high = keys.turn_key(int(origin["at_turn"]))
    inherited = [s for s in lineage_steps(store, origin["run_id"]) if s.sk < high]
    return inherited + own


def _original_input(sfn: Any, state_machine_arn: str, run_id: str, parent: dict[str, Any]) -> dict[str, Any]:
    """The parent's start input (its model choice, user and limits), else one rebuilt from its record."""
    executions = runs.run_executions(sfn, state_machine_arn, run_id)  # oldest first: the run's start
    if executions:
        return json.loads(sfn.describe_execution(executionArn=executions[0]["executionArn"])["input"])
    model = parent.get("model")
    return {
        "goal": parent["goal"],
        "agent": parent["agent"],
        "max_turns": int(parent["max_turns"]),
        "model": json.loads(model) if isinstance(model, str) else model or {},
    }
