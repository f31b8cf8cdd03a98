"""``fork_run`` in process: the fork's records are two small ones, its context at the fork point is
the parent's (forks of forks too), and its later turns run on its own records."""

from __future__ import annotations

import json
from typing import Any

import pytest

from longstep import context, keys
from longstep.errors import InvalidInputError, RunConflictError, StepRecordLostError
from longstep.inmemory import InMemoryStore
from longstep.models.scripted import ScriptedProvider, parse_script
from longstep.runtime import Runtime
from longstep.settings import Settings
from longstep.steps import NoLock
from longstep.tasks.model_turn import model_turn
from longstep.tasks.init_run import start_run
from longstep.tasks.call_tool import call_tool
from longstep_kit.ops.fork import fork_run, lineage_steps
from longstep_kit.ops.replay import ExportArtifacts
from tests.unit.test_replay import SCRIPT, build


class FakeStepFunctions:
    """Records the executions started; lists none (the fork's input is rebuilt from the run record)."""

    def __init__(self) -> None:
        self.started: list[dict[str, Any]] = []

    def list_executions(self, **kwargs: Any) -> dict[str, Any]:
        return {"executions": []}

    def start_execution(self, **kwargs: Any) -> dict[str, Any]:
        self.started.append(kwargs)
        return {"executionArn": f"arn:aws:states:us-east-1:123456789012:execution:sm:{kwargs['name']}"}


@pytest.fixture
def rt():
    context.forget_cache()
    store = InMemoryStore(f"fork-{id(object())}")
    agent = build()
    provider = ScriptedProvider(parse_script({"turns": SCRIPT}))
    runtime = Runtime(
        settings=Settings(checkpoint_table=store.table_name, idempotency_table="i", artifact_bucket="b"),
        store=store,
        artifacts=ExportArtifacts({}),
        lock=NoLock(),
        resolve_agent=lambda name: agent,
        model_override=provider,
    )
    yield runtime
    context.forget_cache()


def drive(rt: Runtime, cursor: dict[str, Any]) -> dict[str, Any]:
    """Run model turns and tool calls from ``cursor`` to the end."""
    while True:
        out = model_turn(rt, cursor)
        for call in out["calls"]:
            call_tool(rt, {**call, "decision": {"decision": "approve"} if call["approval"] else None})
        if out["route"] == "done":
            return out
        cursor = out


def test_a_fork_shares_the_first_turns_and_runs_the_rest(rt):
    drive(rt, start_run(rt, {"run_id": "p", "goal": "file a note and tell bob", "agent": "notes", "max_turns": 10}))
    parent_items = rt.store.items("p")
    sfn = FakeStepFunctions()
    fork = fork_run(rt.store, rt.artifacts, sfn, "arn:sm", "p", 2, new_run_id="f")
    assert set(rt.store.items("f")) == {keys.RUN_RECORD, keys.snapshot_key(2)}
    (started,) = sfn.started
    assert started["name"] == "f" and fork.execution_arn.endswith(":f")
    calls = rt.model_override.calls
    cursor = start_run(rt, json.loads(started["input"]))
    assert cursor["resumed"] and cursor["next_turn"] == 2
    drive(rt, cursor)
    assert rt.model_override.calls - calls == 2  # turns 2 and 3 only
    assert rt.store.items("p") == parent_items  # the parent is only read
    assert [s.sk for s in lineage_steps(rt.store, "f")][:3] == [s.sk for s in rt.store.steps("p")][:3]
    assert min(keys.parse(sk).turn for sk in rt.store.items("f") if sk.startswith("step#")) == 2


def test_a_fork_of_a_fork_reads_through_both_parents(rt):
    drive(rt, start_run(rt, {"run_id": "p", "goal": "file a note and tell bob", "agent": "notes", "max_turns": 10}))
    sfn = FakeStepFunctions()
    fork_run(rt.store, rt.artifacts, sfn, "arn:sm", "p", 2, new_run_id="f1")
    drive(rt, start_run(rt, {"run_id": "f1", "goal": "file a note and tell bob", "agent": "notes", "max_turns": 10}))
    fork_run(rt.store, rt.artifacts, sfn, "arn:sm", "f1", 3, new_run_id="f2", goal="another goal")
    context.forget_cache()
    parent = context.load(rt.store, rt.artifacts, "p", rt.store.get("p", keys.RUN_RECORD), 3).messages(3)
    context.forget_cache()
    nested = context.load(rt.store, rt.artifacts, "f2", rt.store.get("f2", keys.RUN_RECORD), 3).messages(3)
    assert nested[1:] == parent[1:] and nested[0]["content"][0]["text"] == "another goal"
    assert len(lineage_steps(rt.store, "f2")) == len([s for s in rt.store.steps("p") if keys.parse(s.sk).turn < 3])


def test_a_fork_whose_parent_is_gone_fails_instead_of_forgetting(rt):
    drive(rt, start_run(rt, {"run_id": "p", "goal": "file a note and tell bob", "agent": "notes", "max_turns": 10}))
    fork_run(rt.store, rt.artifacts, FakeStepFunctions(), "arn:sm", "p", 2, new_run_id="f")
    for sk in list(rt.store.items("p")):
        rt.store.delete("p", sk)  # as TTL would
    context.forget_cache()
    with pytest.raises(StepRecordLostError, match="forked_from: run p"):
        context.load(rt.store, rt.artifacts, "f", rt.store.get("f", keys.RUN_RECORD), 2)


def test_bad_forks_are_refused_before_anything_is_written(rt):
    drive(rt, start_run(rt, {"run_id": "p", "goal": "file a note and tell bob", "agent": "notes", "max_turns": 10}))
    sfn = FakeStepFunctions()
    with pytest.raises(InvalidInputError, match="at_turn: run p has 3 complete turns"):
        fork_run(rt.store, rt.artifacts, sfn, "arn:sm", "p", 4)
    with pytest.raises(InvalidInputError, match="run_id: no run named 'nobody'"):
        fork_run(rt.store, rt.artifacts, sfn, "arn:sm", "nobody", 0)
    with pytest.raises(InvalidInputError, match="run_id"):
        fork_run(rt.store, rt.artifacts, sfn, "arn:sm", "p", 1, new_run_id="bad id with spaces")
    fork_run(rt.store, rt.artifacts, sfn, "arn:sm", "p", 1, new_run_id="f")
    with pytest.raises(RunConflictError, match="'f' exists"):
        fork_run(rt.store, rt.artifacts, sfn, "arn:sm", "p", 1, new_run_id="f")
    assert len(sfn.started) == 1
