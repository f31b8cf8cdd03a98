"""``longstep fork`` on the local stack: a fork of the triage run at turn 4 makes no model call for
turns 0-3, stores nothing of them again, leaves the original as it was, and finishes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from longstep import keys
from longstep.codec import item_size
from longstep.humans.decisions import decide
from longstep.humans.requests import pending_approvals
from longstep.humans.table import ApprovalTable
from longstep.messages import transcript_sha256
from longstep.store import CheckpointStore
from longstep.transcript import transcript
from longstep_kit import cli
from longstep_kit.local.runner import RunOptions, choose_decision, run_scenario
from longstep_kit.ops.fork import lineage_steps
from longstep_kit.testing.wait import wait_until

AT = 4


def _partition(stack: Any, run_id: str) -> dict[str, dict[str, Any]]:
    items = stack.client("dynamodb").query(
        TableName=stack.outputs["CheckpointTableName"], KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": run_id}}
    )["Items"]
    return {i["sk"]["S"]: i for i in items}


def _s3_keys(stack: Any) -> set[str]:
    return {o["Key"] for o in stack.client("s3").list_objects_v2(Bucket=stack.outputs["ArtifactBucketName"]).get("Contents", [])}


@pytest.fixture(scope="module")
def forked(stack, triage):
    """The triage run, then its fork at turn 4 driven to the end (its approvals answered as the scenario says)."""
    parent = run_scenario(stack, triage, RunOptions(run_id="fork-src"))
    assert parent["status"] == "SUCCEEDED"
    before = {"parent": _partition(stack, "fork-src"), "s3": _s3_keys(stack)}
    first = len(stack.dispatcher.invocations)
    sfn, table = stack.client("stepfunctions"), ApprovalTable(stack.outputs["ApprovalsTableName"], stack.client("dynamodb"))
    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
    stack.clock.hold()  # time stands still while the test plays the approver (nothing else runs)
    try:
        assert cli.main(["fork", "fork-src", "--at-turn", str(AT), "--run-id", "fork-new", "--output", "json"]) == 0

        def finished() -> dict[str, Any] | None:
            for request in pending_approvals(table, "fork-new"):
                decide(table, sfn, request["approval_id"], choose_decision(triage, store, request, RunOptions()))
            described = sfn.describe_execution(executionArn=f"{stack.state_machine_arn.replace(':stateMachine:', ':execution:')}:fork-new")
            return described if described["status"] != "RUNNING" else None

        described = wait_until("the fork to finish", finished, timeout=120)
    finally:
        stack.clock.release()
    return {"parent": parent, "before": before, "described": described, "invocations": stack.dispatcher.invocations[first:]}


def test_the_fork_finishes(forked):
    assert forked["described"]["status"] == "SUCCEEDED", forked["described"].get("cause")


def test_no_model_call_is_made_for_the_shared_turns(forked):
    turns = [inv.result for inv in forked["invocations"] if inv.task == "model_turn" and inv.error is None]
    executed = sorted(r["turn"] for r in turns if not r["replayed"] and r["route"] != "continue")
    assert executed == list(range(AT, forked["parent"]["turns"]))  # 0 model calls for turns 0-3


def test_stored_bytes_grow_only_by_the_new_turns(stack, forked):
    fork = _partition(stack, "fork-new")
    turns = {keys.parse(sk).turn for sk in fork if sk.startswith(keys.STEP_PREFIX)}
    assert min(turns) == AT  # nothing of turns 0-3 is in the fork's partition
    shared = fork[keys.snapshot_key(AT)]
    assert keys.FORKED_FROM in shared and "state" not in shared and "state_ref" not in shared
    assert item_size(shared) < 200  # a pointer, not a copy of the context
    # Artifacts are content-addressed: the fork's outputs that the parent already stored are not stored again.
    assert _s3_keys(stack) == forked["before"]["s3"]


def test_the_original_run_is_untouched(stack, forked):
    assert _partition(stack, "fork-src") == forked["before"]["parent"]


def test_the_fork_shares_the_parents_first_turns_in_its_transcript(stack, forked):
    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
    goal = {"goal": store.get("fork-src", keys.RUN_RECORD)["goal"]}
    fork_messages = transcript(goal, lineage_steps(store, "fork-new"))
    parent_steps = store.steps("fork-src")
    assert transcript(goal, parent_steps, upto_turn=AT) == transcript(goal, lineage_steps(store, "fork-new"), upto_turn=AT)
    assert transcript_sha256(transcript(goal, parent_steps)) == forked["parent"]["transcript_sha256"]
    assert len(fork_messages) == len(transcript(goal, parent_steps))  # the same script from turn 4: as many turns
    record = store.get("fork-new", keys.RUN_RECORD)
    assert json.loads(record[keys.FORKED_FROM]) == {"run_id": "fork-src", "at_turn": AT}


def test_the_forks_model_sees_the_parents_history_under_its_own_goal(stack, forked):
    from longstep import context
    from longstep.artifacts import ArtifactStore

    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
    artifacts = ArtifactStore(stack.outputs["ArtifactBucketName"], stack.client("s3"))
    context.forget_cache()  # cold loads: the fork's from its pointer snapshot, the parent's from its log
    parent = context.load(store, artifacts, "fork-src", store.get("fork-src", keys.RUN_RECORD), AT).messages(AT)
    context.forget_cache()
    fork_record = store.get("fork-new", keys.RUN_RECORD)
    assert context.load(store, artifacts, "fork-new", fork_record, AT).messages(AT) == parent
    context.forget_cache()
    other = context.load(store, artifacts, "fork-new", {**fork_record, "goal": "Only file the P1 ticket."}, AT).messages(AT)
    assert other[0] == {"role": "user", "content": [{"text": "Only file the P1 ticket."}]} and other[1:] == parent[1:]
    assert len(parent) > 2 * AT  # turns 0-3: replies and tool results
    context.forget_cache()


def test_forking_past_the_completed_turns_is_refused(forked, capsys):
    assert cli.main(["fork", "fork-src", "--at-turn", "40", "--run-id", "fork-late"]) == 2
    assert "at_turn: run fork-src has" in capsys.readouterr().err


def test_a_fork_onto_an_existing_run_id_is_refused(forked, capsys):
    assert cli.main(["fork", "fork-src", "--at-turn", "1", "--run-id", "fork-new"]) != 0
    assert "fork-new" in capsys.readouterr().err
