"""Start a counterfactual eval of a recorded run, and wait for it (``longstep eval``, docs/evals.md).

The recorded run is read as ``longstep export`` writes it (:func:`longstep_kit.ops.export.export_run`
of a run on the stack, or an export file). The eval is a new run of the same agent and goal whose
model is a script: the record's own replies before the fork point, the change's replies from it on.
Its start input carries ``eval`` (``longstep.inputs.EvalSpec``), naming the recorded calls uploaded
as an artifact; CallTool answers every call of the run from them, runs only calls that cannot act,
and withholds the others (``longstep.evals``). The recorded run is read, never written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from longstep import keys
from longstep.artifacts import ARTIFACT_PREFIX, ArtifactStore
from longstep.errors import InvalidInputError, RunConflictError
from longstep.inputs import RUN_ID_PATTERN, RUN_ID_RULE, StartInput, parse_model

APPROVAL_POLICIES = ("approve", "reject", "withhold")


@dataclass(frozen=True)
class EvalStart:
    """A started eval run.

    Attributes:
        run_id: the eval run.
        of: the recorded run.
        at_turn: the eval's first turn under the change.
        execution_arn: the eval run's execution.
    """

    run_id: str
    of: str
    at_turn: int
    execution_arn: str


def recorded_turns(exported: dict[str, Any]) -> list[int]:
    """The turns an export records, in order.

    Raises:
        InvalidInputError: the document is not an export (names the missing field).
    """
    for name in ("name", "input", "turns", "recorded"):
        if name not in exported:
            raise InvalidInputError(f"{name}: not a `longstep export` file (no {name!r})")
    return sorted(int(turn) for turn in exported["turns"])


def recorded_calls(exported: dict[str, Any]) -> list[dict[str, Any]]:
    """Every tool call an export records, in order: ``turn``, ``call``, ``tool``, ``args``, ``result``
    (None when the run recorded no result for it)."""
    results = exported["recorded"].get("tool_results") or {}
    out = []
    for turn in recorded_turns(exported):
        for index, call in enumerate(exported["turns"][str(turn)].get("tool_calls") or []):
            out.append({"turn": turn, "call": index, "tool": call["name"], "args": call["input"], "result": results.get(f"{turn}:{index}")})
    return out


def check_at_turn(exported: dict[str, Any], at_turn: int) -> None:
    """Refuse a fork point the record does not have.

    Raises:
        InvalidInputError: ``at_turn`` is not one of the recorded turns.
    """
    turns = recorded_turns(exported)
    if at_turn not in turns:
        last = turns[-1] if turns else -1
        raise InvalidInputError(f"at_turn: run {exported['name']} records turns 0-{last}; give a turn from 0 to {last}, not {at_turn}")


def eval_script(exported: dict[str, Any], change_turns: dict[str, Any], at_turn: int) -> dict[str, Any]:
    """The eval's model script: the record's replies before ``at_turn``, the change's from it on."""
    turns = {str(t): exported["turns"][str(t)] for t in recorded_turns(exported) if t < at_turn}
    turns.update({str(t): reply for t, reply in change_turns.items() if int(t) >= at_turn})
    return {"turns": turns}


def start_eval(
    store: Any,
    artifacts: ArtifactStore,
    sfn: Any,
    state_machine_arn: str,
    exported: dict[str, Any],
    change_turns: dict[str, Any],
    *,
    at_turn: int = 0,
    approvals: str = "withhold",
    run_id: str | None = None,
) -> EvalStart:
    """Upload the record and the eval's script, and start the eval run.

    Args:
        store: the checkpoint store (an eval run's id must be new).
        artifacts: the stack's artifact store (the record and the script go there).
        sfn: a Step Functions client.
        state_machine_arn: the state machine (its alias) to start the eval run on.
        exported: the recorded run, as ``longstep export`` writes it.
        change_turns: the change's scripted replies by turn (a scenario's ``turns``).
        at_turn: the first turn under the change.
        approvals: the policy for a call that needs an approver and matches no recorded call.
        run_id: the eval run's id (default ``<run>-eval<at_turn>``).

    Raises:
        InvalidInputError: a bad fork point, policy or run id (the message names the field).
        RunConflictError: a run called ``run_id`` exists.
    """
    check_at_turn(exported, at_turn)
    if approvals not in APPROVAL_POLICIES:
        raise InvalidInputError(f"approvals: {approvals!r} is not one of {', '.join(APPROVAL_POLICIES)}")
    of = str(exported["name"])
    run_id = run_id or f"{of}-eval{at_turn}"
    if not RUN_ID_PATTERN.fullmatch(run_id):
        raise InvalidInputError(f"run_id: {run_id!r} {RUN_ID_RULE}; pass another --run-id")
    if store.get(run_id, keys.RUN_RECORD) is not None:  # before anything is uploaded
        raise RunConflictError(f"run_id: a run named {run_id!r} exists; pass another --run-id")
    document = {"run_id": of, "calls": [c for c in recorded_calls(exported) if c["result"] is not None]}
    record_uri = artifacts.put(json.dumps(document).encode())["uri"]
    script = artifacts.put(json.dumps(eval_script(exported, change_turns, at_turn)).encode())
    start = exported["input"]
    payload = {
        "run_id": run_id,
        "goal": start["goal"],
        "agent": start["agent"],
        "model": {"provider": "scripted", "script_uri": f"s3://{artifacts.bucket}/{ARTIFACT_PREFIX}{script['sha256']}"},
        "eval": {"of": of, "at_turn": at_turn, "record_uri": record_uri, "approvals": approvals},
        **({"max_turns": int(start["max_turns"])} if start.get("max_turns") else {}),
    }
    parse_model(StartInput, payload, "eval input")  # a bad run id fails before anything starts
    arn = sfn.start_execution(stateMachineArn=state_machine_arn, name=run_id, input=json.dumps(payload))["executionArn"]
    return EvalStart(run_id=run_id, of=of, at_turn=at_turn, execution_arn=arn)
