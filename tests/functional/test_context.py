"""Bounded memory: deltas plus snapshots, a warm cache, summaries past the budget, compression.

Drives the task functions directly on moto (tables from the shared key schemas) with a scripted
model, counting the DynamoDB requests a model turn makes to build its context.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from longstep import codec, context, keys
from longstep.contract import migrations
from longstep.tasks.common import load_run
from longstep.tasks.model_turn import model_turn
from longstep.tasks.init_run import start_run
from longstep.tasks.call_tool import call_tool
from longstep.agent import Agent
from longstep.artifacts import ArtifactStore
from longstep.models.scripted import Script, ScriptedProvider
from longstep.runtime import Runtime
from longstep.settings import Settings
from longstep.steps import NoLock
from longstep.store import CheckpointStore
from longstep.tools.registry import Effect, ToolContext, ToolRegistry, tool
from longstep.messages import transcript_sha256
from longstep.transcript import transcript
from pydantic import BaseModel

TURNS = 40
# What the fixture's runtime is watched with: its request counter and its scripted model.
COUNTERS: dict[int, "Counter"] = {}
PROVIDERS: dict[int, ScriptedProvider] = {}


class ReadArgs(BaseModel):
    path: str


registry = ToolRegistry()


@tool(registry, effect=Effect.READ)
def read_file(args: ReadArgs, ctx: ToolContext) -> dict:
    """Read a file."""
    return {"path": args.path, "text": f"contents of {args.path} " * 40}


def _script(turns: int) -> Script:
    body = {str(t): {"text": f"step {t}", "tool_calls": [{"name": "read_file", "input": {"path": f"src/f{t}.py"}}]} for t in range(turns)}
    body[str(turns)] = {"text": "Summary: done"}
    return Script.model_validate({"turns": body})


class Counter:
    """Counts DynamoDB read requests and the items they return."""

    def __init__(self, client) -> None:
        self.requests = self.items = 0
        client.meta.events.register("after-call.dynamodb.*", self._after)

    def _after(self, http_response, parsed, model, **kwargs) -> None:
        if model.name in ("Query", "GetItem", "Scan", "BatchGetItem"):
            self.requests += 1
            self.items += len(parsed.get("Items", [])) + (1 if "Item" in parsed else 0)

    def reset(self) -> None:
        self.requests = self.items = 0


@pytest.fixture
def rt():
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        schema = keys.checkpoint_table()
        ddb.create_table(TableName="cp", **schema.create_table_arguments())
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="art")
        context.forget_cache()
        settings = Settings(
            checkpoint_table="cp",
            idempotency_table="unused",
            artifact_bucket="art",
            snapshot_every=10,
            context_budget_tokens=4_000,
            keep_recent_turns=4,
        )
        agent = Agent(name="bench", system_prompt="code", tools=registry)
        provider = ScriptedProvider(_script(TURNS))
        runtime = Runtime(
            settings=settings,
            store=CheckpointStore("cp", ddb),
            artifacts=ArtifactStore("art", s3),
            lock=NoLock(),
            resolve_agent=lambda name: agent,
            model_override=provider,
        )
        COUNTERS[id(runtime)] = Counter(ddb)
        PROVIDERS[id(runtime)] = provider
        yield runtime
        context.forget_cache()


def _run(rt: Runtime, upto: int) -> dict:
    cursor = start_run(rt, {"run_id": "r1", "goal": "refactor", "agent": "bench", "max_turns": 100})
    while cursor["next_turn"] < upto:
        out = model_turn(rt, cursor)
        for call in out["calls"]:
            call_tool(rt, call)
        cursor = out
    return cursor


def _cold_turn_cost(rt: Runtime, turn: int) -> tuple[int, int]:
    context.forget_cache()
    counter = COUNTERS[id(rt)]
    counter.reset()
    run = load_run(rt, "r1")  # a cold model turn reads the run record, then its context
    context.load(rt.store, rt.artifacts, "r1", run, turn)
    return counter.requests, counter.items


def test_snapshots_are_written_every_snapshot_every_turns(rt):
    _run(rt, 25)
    snaps = [i["sk"] for i in rt.store.query_prefix("r1", keys.STEP_PREFIX) if keys.parse(i["sk"]).kind == keys.SNAPSHOT]
    assert snaps == [context.snapshot_key(10), context.snapshot_key(20)]
    assert rt.store.get("r1", keys.RUN_RECORD)[keys.SNAPSHOT_AT] == 20


def test_resume_reads_one_snapshot_and_a_bounded_number_of_deltas(rt):
    _run(rt, TURNS)
    early = _cold_turn_cost(rt, 15)
    late = _cold_turn_cost(rt, 35)
    assert early[0] == late[0] == 2  # the run record; one Query: the snapshot's window, the summaries and steps after it
    run = rt.store.get("r1", keys.RUN_RECORD)
    window = context.snapshot_windows(run)[run[keys.SNAPSHOT_AT]]
    assert window > 0  # a summary moved the window on: the Query does not start at turn 0
    # The run record and the records from the window's first turn: the snapshot references them.
    assert late[1] == 1 + len(rt.store.query_between("r1", keys.turn_key(window), keys.snapshot_key(35)))


def test_a_warm_context_reads_only_what_is_new(rt):
    cursor = _run(rt, 12)
    counter = COUNTERS[id(rt)]
    counter.reset()
    out = model_turn(rt, cursor)  # turn 12: the cache holds everything before turn 11's results
    assert counter.items <= 8  # the run record, the step lookups, turn 11's two records
    assert out["replayed"] is False


def test_the_live_context_stays_under_budget_and_the_full_transcript_keeps_everything(rt, monkeypatch):
    sizes = []
    original = ScriptedProvider.converse

    def spy(self, **kwargs):
        sizes.append(context.estimate_tokens(kwargs["messages"]))
        return original(self, **kwargs)

    monkeypatch.setattr(ScriptedProvider, "converse", spy)
    _run(rt, TURNS)
    per_turn = max(context.estimate_tokens([m]) for m in transcript({"goal": "refactor"}, rt.store.steps("r1")))
    assert max(sizes) <= rt.settings.context_budget_tokens + 2 * per_turn
    assert PROVIDERS[id(rt)].summaries >= 2
    assert any(keys.parse(i["sk"]).kind == keys.SUMMARY for i in rt.store.query_prefix("r1", keys.STEP_PREFIX))
    full = transcript({"goal": "refactor"}, rt.store.steps("r1"))
    assert len(full) == 1 + 2 * TURNS  # every turn's reply and results are still in the log


def test_a_resumed_context_equals_the_warm_one(rt):
    _run(rt, 33)
    run = load_run(rt, "r1")
    warm = context.load(rt.store, rt.artifacts, "r1", run, 33).messages(33)
    context.forget_cache()
    cold = context.load(rt.store, rt.artifacts, "r1", run, 33).messages(33)
    assert cold == warm


def test_large_records_are_stored_compressed(rt):
    _run(rt, 2)
    item = rt.store.get("r1", keys.tool_step_key(0, 0))
    assert "result_z" in item and "result" not in item
    assert rt.store.get_step("r1", keys.tool_step_key(0, 0)).result["content"]["path"] == "src/f0.py"


# Every checkpoint item of run r1 after 25 of this module's 41 turns, as schema version 3 wrote
# them (snapshots at 10 and 20 copying the context, two summaries), and the transcript hash that
# version gave the whole run. Made by running ``_run(rt, 25)`` on that version's runtime.
V3_RUN = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "records_v3_context.json").read_text())


def _resume_to_the_end(rt: Runtime, recorded: int) -> list:
    """Start run r1 again (its records put in as a fixture holds them: ``recorded`` turns) and run
    it to its end; its recorded steps."""
    cursor = start_run(rt, {"run_id": "r1", "goal": "refactor", "agent": "bench", "max_turns": 100, "generation": 1})
    assert cursor["next_turn"] == recorded
    while True:
        out = model_turn(rt, cursor)
        if out["route"] == "done":
            break
        for call in out["calls"]:
            call_tool(rt, call)
        cursor = out
    return rt.store.steps("r1")


def _put_typed(rt: Runtime, items: list[dict]) -> None:
    """Put the fixture's items into the table as they are (binaries from base64)."""
    for item in items:
        typed = {k: {"B": base64.b64decode(v["B"]["base64"])} if "B" in v else v for k, v in item.items()}
        rt.store.client.put_item(TableName="cp", Item=typed)


def test_a_run_of_snapshots_that_copy_resumes_on_snapshots_that_reference(rt, monkeypatch):
    given: dict[int, list] = {}  # the messages each model call of the resumed run is given
    original = ScriptedProvider.converse

    def spy(self, **kwargs):
        given[kwargs["turn"]] = kwargs["messages"]
        return original(self, **kwargs)

    monkeypatch.setattr(ScriptedProvider, "converse", spy)
    _put_typed(rt, V3_RUN["items"])
    snapshot = rt.store.get("r1", keys.snapshot_key(20))
    assert "state_z" in snapshot or "state" in snapshot  # the older format: the context copied
    steps = _resume_to_the_end(rt, V3_RUN["turns_recorded"])
    assert transcript_sha256(transcript(rt.store.get("r1", keys.RUN_RECORD), steps)) == V3_RUN["transcript_sha256"]
    later = rt.store.get("r1", keys.snapshot_key(30))
    assert context.WINDOW_FROM in later and not {"state", "state_z", "state_ref"} & set(later)
    run = load_run(rt, "r1")
    assert run[keys.SNAPSHOT_AT] == 40 and set(context.snapshot_windows(run)) >= {30, 40}
    summarized = {keys.parse(i["sk"]).turn for i in rt.store.query_prefix("r1", keys.STEP_PREFIX) if keys.parse(i["sk"]).kind == keys.SUMMARY}
    # A cold load, from either format, gives the model what the run gave it (at a turn that made
    # no summary: one made at the turn itself comes after the load).
    checked = sorted({25, 29, 30, 31, 33, 39, 40} - summarized)
    assert len(checked) >= 4
    for turn in checked:
        assert _cold_turn_cost(rt, turn)[0] == 2
        context.forget_cache()
        assert context.load(rt.store, rt.artifacts, "r1", run, turn, rt.settings.snapshot_every).messages(turn) == given[turn]


# Every checkpoint item of run r1 after 25 of this module's 41 turns, as schema version 4 wrote
# them before issue 28's per-record cuts (every record stamped with ``schema_version``, replies
# under 512 bytes as plain JSON), and the transcript hash that runtime gave the whole run. Made
# by running ``_run(rt, 25)`` on that runtime (commit 024cc1d's ``layers/runtime``).
V4_STAMPED_RUN = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "records_v4_stamped.json").read_text())


def test_a_run_recorded_before_the_per_record_cuts_resumes_after_them(rt):
    _put_typed(rt, V4_STAMPED_RUN["items"])
    old = {i["sk"]["S"] for i in V4_STAMPED_RUN["items"]}
    model_0 = rt.store.client.get_item(TableName="cp", Key={"pk": {"S": "r1"}, "sk": {"S": keys.model_step_key(0)}})["Item"]
    assert "result" in model_0 and model_0["schema_version"] == {"N": "4"}  # the older format
    steps = _resume_to_the_end(rt, V4_STAMPED_RUN["turns_recorded"])
    assert len(steps) > 2 * V4_STAMPED_RUN["turns_recorded"]
    assert transcript_sha256(transcript(rt.store.get("r1", keys.RUN_RECORD), steps)) == V4_STAMPED_RUN["transcript_sha256"]
    # The records written after the cut: version 5, every step's payload packed against the
    # dictionary; the older ones are as they were.
    raw = {i["sk"]["S"]: i for i in rt.store.client.scan(TableName="cp")["Items"]}
    new_steps = [sk for sk in raw if sk not in old and keys.parse(sk).is_step]
    assert new_steps and all(raw[sk]["schema_version"] == {"N": str(migrations.CURRENT_SCHEMA)} for sk in new_steps)
    assert all(codec.uses_dictionary(raw[sk]["result_z"]["B"]) for sk in new_steps)
    assert raw[keys.model_step_key(0)] == model_0
