"""The context loader on the in-memory store: resume point, snapshots + deltas, summaries, and
what a cold load costs (two requests: the run record and one Query)."""

import json

import pytest

from longstep import context, keys
from longstep.inmemory import InMemoryStore
from longstep.transcript import transcript

RUN = "run-1"
GOAL = "refactor the parser"


class Artifacts:
    """Snapshots too large for an item go here (content-addressed, like ArtifactStore)."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}

    def put(self, data: bytes) -> dict:
        uri = f"artifact://sha256/{len(self.objects)}"
        self.objects[uri] = data
        return {"uri": uri}

    def get(self, uri: str) -> bytes:
        return self.objects[uri]


def reply(turn: int, tools: int = 1) -> dict:
    content = [{"text": f"turn {turn}"}] + [
        {"toolUse": {"toolUseId": f"t{turn}-{c}", "name": "read", "input": {"path": f"f{turn}.py"}}} for c in range(tools)
    ]
    return {"message": {"role": "assistant", "content": content}, "stop_reason": "tool_use"}


def record_turn(store, turn: int, tools: int = 1) -> None:
    store.record_step(RUN, keys.model_step_key(turn), "model", "converse", reply(turn, tools))
    for call in range(tools):
        store.record_step(RUN, keys.tool_step_key(turn, call), "tool", "read", {"status": "success", "content": f"body {turn}.{call}"})


@pytest.fixture
def store():
    context.forget_cache()
    store = InMemoryStore()
    store.put_once(RUN, keys.RUN_RECORD, {"goal": GOAL, "agent": "coder"})
    yield store
    context.forget_cache()


@pytest.fixture
def artifacts():
    return Artifacts()


def run_record(store):
    return store.get(RUN, keys.RUN_RECORD)


def cold_load(store, artifacts, upto: int) -> tuple[context.LiveContext, int]:
    """A cold model turn: the run record, then the context; returns the requests made."""
    context.forget_cache()
    before = store.reads()
    ctx = context.load(store, artifacts, RUN, run_record(store), upto)
    return ctx, store.reads() - before


def run_turns(store, artifacts, end: int, snapshot_every: int, start: int = 0) -> None:
    """What ModelTurn does each turn: load the context, snapshot every ``snapshot_every`` turns."""
    for turn in range(start, end):
        live = context.load(store, artifacts, RUN, run_record(store), turn)
        if turn and turn % snapshot_every == 0:
            context.write_snapshot(store, artifacts, RUN, live)
        record_turn(store, turn)


def test_a_context_without_snapshots_is_the_goal_and_every_turn(store, artifacts):
    for turn in range(3):
        record_turn(store, turn, tools=2)
    ctx, _ = cold_load(store, artifacts, 3)
    assert ctx.messages(3) == transcript({"goal": GOAL}, store.steps(RUN))
    assert ctx.loaded_upto == 3 and ctx.summary is None


def test_a_snapshot_points_the_run_record_at_it_and_never_back(store, artifacts):
    run_turns(store, artifacts, 25, snapshot_every=10)
    assert run_record(store)[keys.SNAPSHOT_AT] == 20
    snaps = [i["sk"] for i in store.query_prefix(RUN, keys.STEP_PREFIX) if keys.parse(i["sk"]).kind == keys.SNAPSHOT]
    assert snaps == [keys.snapshot_key(10), keys.snapshot_key(20)]
    context.write_snapshot(store, artifacts, RUN, context.load(store, artifacts, RUN, run_record(store), 10))  # a late retry
    assert run_record(store)[keys.SNAPSHOT_AT] == 20


@pytest.mark.parametrize("upto", [0, 5, 10, 11, 19, 20, 24, 25])
def test_a_cold_load_reads_the_run_record_and_one_query_and_equals_the_full_log(store, artifacts, upto):
    run_turns(store, artifacts, 25, snapshot_every=10)
    before = store.reads()
    ctx, reads = cold_load(store, artifacts, upto)
    assert reads == 2  # GetItem of the run record, one Query from the latest snapshot
    assert store.requests["Query"] >= 1 and store.reads() - before == 2
    assert ctx.messages(upto) == transcript({"goal": GOAL}, store.steps(RUN), upto_turn=upto)


def test_a_cold_load_before_the_latest_snapshot_uses_an_earlier_one(store, artifacts):
    run_turns(store, artifacts, 25, snapshot_every=10)
    ctx, reads = cold_load(store, artifacts, 15)
    assert reads == 2 and ctx.messages(15) == transcript({"goal": GOAL}, store.steps(RUN), upto_turn=15)


def test_a_lagging_pointer_still_finds_the_latest_snapshot(store, artifacts):
    run_turns(store, artifacts, 25, snapshot_every=10)
    store.update(RUN, keys.RUN_RECORD, {keys.SNAPSHOT_AT: 10})  # as if a crash came between the two writes
    ctx, reads = cold_load(store, artifacts, 24)
    assert reads == 2 and ctx.messages(24) == transcript({"goal": GOAL}, store.steps(RUN), upto_turn=24)


def test_a_warm_load_reads_only_the_new_turns(store, artifacts):
    run_turns(store, artifacts, 12, snapshot_every=10)
    before = store.reads()
    ctx = context.load(store, artifacts, RUN, run_record(store), 12)
    assert store.reads() - before == 2  # the run record (the test reads it) and the turns since the cache
    assert ctx.messages(12) == transcript({"goal": GOAL}, store.steps(RUN), upto_turn=12)
    before = store.reads()
    context.load(store, artifacts, RUN, {"goal": GOAL}, 12)
    assert store.reads() == before  # nothing new: nothing read


def test_a_summary_replaces_the_turns_it_covers_and_survives_a_cold_load(store, artifacts):
    run_turns(store, artifacts, 13, snapshot_every=10)
    summary = context.record_summary(store, RUN, 13, {"upto_turn": 8, "text": "turns 0-7: read files"})
    assert context.record_summary(store, RUN, 13, {"upto_turn": 9, "text": "a replay"}) == summary  # the first stands
    record_turn(store, 13)
    ctx, reads = cold_load(store, artifacts, 14)
    assert reads == 2 and ctx.summary == summary and ctx.start == 8
    assert min(ctx.turns) == 8
    assert "turns 0-7: read files" in json.dumps(ctx.messages(14))
    # The summary made while building turn 13's context is not part of that context.
    assert cold_load(store, artifacts, 13)[0].summary is None


def test_a_snapshot_too_large_for_an_item_goes_to_the_artifact_store(store, artifacts, monkeypatch):
    """A snapshot that copies the context (a fork's window starting in its parent's turns)."""
    monkeypatch.setattr(context, "SNAPSHOT_INLINE_BYTES", 10)
    monkeypatch.setattr(context, "_references", lambda ctx: False)
    run_turns(store, artifacts, 12, snapshot_every=10)
    assert "state_ref" in store.get(RUN, keys.snapshot_key(10)) and artifacts.objects
    ctx, _ = cold_load(store, artifacts, 12)
    assert ctx.messages(12) == transcript({"goal": GOAL}, store.steps(RUN), upto_turn=12)


@pytest.mark.parametrize(("end", "partial_tools", "expected"), [(0, None, 0), (7, None, 7), (23, None, 23), (23, 0, 23), (23, 1, 23)])
def test_the_resume_point_is_the_first_incomplete_turn(store, artifacts, end, partial_tools, expected):
    run_turns(store, artifacts, end, snapshot_every=10)
    if partial_tools is not None:  # turn ``end`` has its reply (two calls) but not every result
        store.record_step(RUN, keys.model_step_key(end), "model", "converse", reply(end, tools=2))
        for call in range(partial_tools):
            store.record_step(RUN, keys.tool_step_key(end, call), "tool", "read", {"status": "success", "content": "x"})
    before = store.reads()
    assert context.resume_point(store, artifacts, RUN, run_record(store)) == expected
    assert store.reads() - before == 2


def test_the_resume_point_needs_no_snapshot_state(store, artifacts, monkeypatch):
    run_turns(store, artifacts, 23, snapshot_every=10)
    monkeypatch.setattr(context, "_snapshot_state", lambda *a: pytest.fail("the key names the snapshot's turn"))
    assert context.resume_point(store, artifacts, RUN, run_record(store)) == 23


class QueryLog:
    """The ``low`` bound of each Query the loader makes (where a DynamoDB Query would start paging)."""

    def __init__(self, store) -> None:
        self.lows: list[str] = []
        original = store.query_between

        def logged(run_id, low, high, **kwargs):
            self.lows.append(low)
            return original(run_id, low, high, **kwargs)

        store.query_between = logged


def test_a_cold_load_of_a_past_turn_starts_at_the_snapshot_before_it(store, artifacts):
    """A fork's or a replay's turn 15 while the run's latest snapshot is at 20: one Query from the
    window of the snapshot at 10 (the run record names it), not from the latest one."""
    run_turns(store, artifacts, 25, snapshot_every=10)
    log = QueryLog(store)
    context.forget_cache()
    ctx = context.load(store, artifacts, RUN, run_record(store), 15, snapshot_every=10)
    assert log.lows == [keys.turn_key(context.snapshot_windows(run_record(store))[10])]
    assert ctx.messages(15) == transcript({"goal": GOAL}, store.steps(RUN), upto_turn=15)


def test_a_past_turn_with_no_snapshot_where_expected_reads_the_whole_log_once_more(store, artifacts):
    run_turns(store, artifacts, 25, snapshot_every=10)
    log = QueryLog(store)
    context.forget_cache()
    ctx = context.load(store, artifacts, RUN, run_record(store), 15, snapshot_every=7)  # the cadence changed since
    assert log.lows == [keys.snapshot_key(14), keys.turn_key(0)]
    assert ctx.messages(15) == transcript({"goal": GOAL}, store.steps(RUN), upto_turn=15)


def summarizing_turns(store, artifacts, end: int, snapshot_every: int, keep: int = 3, every: int = 4) -> None:
    """``run_turns`` with a summary every ``every`` turns of everything but the last ``keep`` turns."""
    for turn in range(end):
        live = context.load(store, artifacts, RUN, run_record(store), turn, snapshot_every)
        if turn and turn % snapshot_every == 0:
            context.write_snapshot(store, artifacts, RUN, live)
        if turn and turn % every == 0 and turn - keep > live.start:
            live.summarize_upto(context.record_summary(store, RUN, turn, {"upto_turn": turn - keep, "text": f"up to {turn - keep}"}))
            context.remember(store, RUN, live)
        record_turn(store, turn)


def test_a_snapshot_references_its_window_instead_of_copying_it(store, artifacts):
    summarizing_turns(store, artifacts, 25, snapshot_every=10)
    snapshot = store.get(RUN, keys.snapshot_key(20))
    assert not {"state", "state_z", "state_ref"} & set(snapshot) and not artifacts.objects
    # Turn 20's context: the summary made at 20 comes after the load, so the one made at 16 (up to 13).
    assert (snapshot[context.WINDOW_FROM], snapshot[context.SUMMARY_AT]) == (13, 16)
    assert context.snapshot_windows(run_record(store)) == {10: 5, 20: 13}
    warm = context.load(store, artifacts, RUN, run_record(store), 25, 10)
    for upto, summarized in ((20, 13), (23, 17), (25, 21)):  # one Query from the window, the summaries after the snapshot read too
        ctx, reads = cold_load(store, artifacts, upto)
        assert reads == 2 and ctx.summary["upto_turn"] == summarized
    context.forget_cache()
    assert context.load(store, artifacts, RUN, run_record(store), 25, 10).messages(25) == warm.messages(25)


def test_a_snapshot_whose_pointer_was_lost_is_read_from_its_window(store, artifacts, monkeypatch):
    """A crash after the snapshot's put, before the run record named it: the run record still
    names the snapshot before; the loader finds the later one and reads its window again."""
    summarizing_turns(store, artifacts, 21, snapshot_every=10)
    expected = context.load(store, artifacts, RUN, run_record(store), 21, 10).messages(21)
    store.update(RUN, keys.RUN_RECORD, {keys.SNAPSHOT_AT: 10, keys.SNAPSHOT_WINDOWS: '{"10":5}'})
    log = QueryLog(store)
    context.forget_cache()
    assert context.load(store, artifacts, RUN, run_record(store), 21, 10).messages(21) == expected
    assert log.lows == [keys.turn_key(5)]  # the window of 20 starts at 13: within the Query from 5


def test_a_fork_whose_window_starts_in_its_parent_copies_the_context(store, artifacts):
    run_turns(store, artifacts, 12, snapshot_every=10)
    live = context.load(store, artifacts, RUN, {**run_record(store), keys.FORKED_FROM: '{"run_id": "p", "at_turn": 4}'}, 12)
    context.write_snapshot(store, artifacts, RUN, live)
    assert "state" in store.get(RUN, keys.snapshot_key(12)) or "state_z" in store.get(RUN, keys.snapshot_key(12))
    assert 12 not in context.snapshot_windows(run_record(store))
