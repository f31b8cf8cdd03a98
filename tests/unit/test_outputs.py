"""Repeated tool outputs recorded once per run (``longstep.outputs``): a repeat is a reference to
the record holding the result, every reader gets the result, and a cold load still reads its
holder in its one Query (the snapshot's window reaches back to it)."""

import pytest

from longstep import context, keys, outputs
from longstep.errors import StepRecordLostError
from longstep.inmemory import InMemoryStore
from longstep.transcript import transcript
from tests.unit.test_context_loader import GOAL, RUN, Artifacts, QueryLog, reply, run_record

BODY = "def parse(tokens):\n    return [t for t in tokens if t]\n" * 8  # long enough to share


def result(text: str) -> dict:
    return {"status": "success", "content": text}


@pytest.fixture
def store():
    context.forget_cache()
    outputs.forget()
    store = InMemoryStore()
    store.put_once(RUN, keys.RUN_RECORD, {"goal": GOAL, "agent": "coder", "created_at": 1.5, outputs.IDENTITY_FIELD: "first"})
    yield store
    context.forget_cache()
    outputs.forget()


def turn_with(store, turn: int, text: str) -> None:
    """What ModelTurn and CallTool record for a turn of one call whose tool returns ``text``."""
    run = run_record(store)
    store.share_from(RUN, outputs.floor(run), outputs.identity(run))  # as the tasks do when they read the run
    store.record_step(RUN, keys.model_step_key(turn), "model", "converse", reply(turn))
    store.record_step(RUN, keys.tool_step_key(turn, 0), "tool", "read", result(text))


def test_a_repeated_result_is_a_reference_and_reads_as_the_result(store):
    turn_with(store, 0, BODY)
    turn_with(store, 1, "something else " * 10)
    turn_with(store, 2, BODY)
    raw = context.decode_json("result", store.get(RUN, keys.tool_step_key(2, 0)))
    assert raw == {outputs.SAME_AS: keys.tool_step_key(0, 0)}
    assert store.get_step(RUN, keys.tool_step_key(2, 0)).result == result(BODY)
    steps = store.steps(RUN)
    assert [s.result for s in steps if s.kind == "tool"] == [result(BODY), result("something else " * 10), result(BODY)]
    assert store.steps_between(RUN, 2)[1].result == result(BODY)  # its holder is read (one request)


def test_a_short_result_or_a_store_without_the_runs_floor_records_the_content(store):
    turn_with(store, 0, "ok")
    turn_with(store, 1, "ok")
    assert context.decode_json("result", store.get(RUN, keys.tool_step_key(1, 0))) == result("ok")
    other = InMemoryStore()  # no share_from: the run's floor is not known
    other.record_step(RUN, keys.tool_step_key(0, 0), "tool", "read", result(BODY))
    other.record_step(RUN, keys.tool_step_key(1, 0), "tool", "read", result(BODY))
    assert context.decode_json("result", other.get(RUN, keys.tool_step_key(1, 0))) == result(BODY)


def test_a_cold_process_records_the_content_again(store):
    turn_with(store, 0, BODY)
    outputs.forget()  # another container
    turn_with(store, 1, BODY)
    assert context.decode_json("result", store.get(RUN, keys.tool_step_key(1, 0))) == result(BODY)


def test_no_reference_reaches_before_the_runs_floor(store):
    turn_with(store, 0, BODY)
    store.update(RUN, keys.RUN_RECORD, {keys.SNAPSHOT_AT: 5, keys.SNAPSHOT_WINDOWS: '{"5":3}'})
    turn_with(store, 6, BODY)  # the holder at 0 is before the floor (3): a cold load would not read it
    assert context.decode_json("result", store.get(RUN, keys.tool_step_key(6, 0))) == result(BODY)
    turn_with(store, 7, BODY)  # turn 6 holds it now
    assert context.decode_json("result", store.get(RUN, keys.tool_step_key(7, 0))) == {outputs.SAME_AS: keys.tool_step_key(6, 0)}


def test_a_snapshots_window_reaches_back_to_the_holders_its_turns_reference(store):
    artifacts = Artifacts()
    for turn in range(16):
        live = context.load(store, artifacts, RUN, run_record(store), turn, 5)
        if turn and turn % 5 == 0:
            context.write_snapshot(store, artifacts, RUN, live)
        if turn == 8:  # a summary up to turn 6: turn 7 repeats turn 1's result
            live.summarize_upto(context.record_summary(store, RUN, turn, {"upto_turn": 6, "text": "turns 0-5"}))
            context.remember(store, RUN, live)
        turn_with(store, turn, BODY if turn in (1, 7, 13) else f"file {turn} " * 20)
    assert context.snapshot_windows(run_record(store)) == {5: 0, 10: 1, 15: 1}  # 6 without the holder at 1
    for upto in (11, 14, 15, 16):  # turn 13 (after the snapshot at 10) repeats turn 1 (before it, summarized) too
        log = QueryLog(store)
        context.forget_cache()
        before = store.reads()
        ctx = context.load(store, artifacts, RUN, run_record(store), upto, 5)
        assert log.lows == [keys.turn_key(1)] and store.reads() - before == 2  # the run record, one Query: the holder came with it
        assert ctx.turns[7]["tools"][0] == result(BODY) and (upto <= 13 or ctx.turns[13]["tools"][0] == result(BODY))
    full = transcript({"goal": GOAL}, store.steps(RUN), upto_turn=16)
    assert ctx.messages(16)[-1] == full[-1]


def test_a_missing_holder_is_reported_not_read_as_content(store):
    turn_with(store, 0, BODY)
    turn_with(store, 1, BODY)
    store.delete(RUN, keys.tool_step_key(0, 0))
    with pytest.raises(StepRecordLostError, match="repeats the result of step#000000#tool#000"):
        store.steps(RUN)


def test_a_run_made_again_under_the_same_id_never_references_the_earlier_ones_records(store):
    turn_with(store, 0, BODY)
    store.delete(RUN, keys.tool_step_key(0, 0))
    store.delete(RUN, keys.model_step_key(0))
    # Deleted and started again at the same instant (a local stack reset with its virtual clock):
    # only the record's identity tells the two runs apart.
    store.put(RUN, keys.RUN_RECORD, {"goal": GOAL, "agent": "coder", "created_at": 1.5, outputs.IDENTITY_FIELD: outputs.new_identity()})
    turn_with(store, 0, "another file " * 20)
    turn_with(store, 1, BODY)
    assert context.decode_json("result", store.get(RUN, keys.tool_step_key(1, 0))) == result(BODY)
    store.put(RUN, keys.RUN_RECORD, {"goal": GOAL, "agent": "coder", "created_at": 1.5})  # a record without an identity
    turn_with(store, 2, BODY)
    assert context.decode_json("result", store.get(RUN, keys.tool_step_key(2, 0))) == result(BODY)


def test_a_claimed_step_records_a_repeat_as_a_reference_and_its_replay_is_the_result(store):
    from longstep.steps import RecordLease, run_step

    turn_with(store, 0, BODY)

    def step(execute):
        sk = keys.tool_step_key(1, 0)
        return run_step(store, RecordLease(), run_id=RUN, sk=sk, kind="tool", name="read", lock_key=keys.idempotency_key(RUN, 1, 0), execute=execute)

    first = step(lambda: result(BODY))
    assert first.result == result(BODY) and not first.replayed
    assert context.decode_json("result", store.get(RUN, keys.tool_step_key(1, 0))) == {outputs.SAME_AS: keys.tool_step_key(0, 0)}
    again = step(lambda: pytest.fail("a recorded step is replayed"))
    assert again.replayed and again.result == result(BODY)


def test_a_warm_context_reads_one_query_a_turn_when_every_turn_repeats_one_result(store):
    """bench/turns' read loop: the same document every turn, summaries and snapshots on the way.
    A holder the context summarized stays in memory (``held``): no turn reads it again."""
    artifacts = Artifacts()
    queries = []
    for turn in range(30):
        run = run_record(store)
        before = store.reads()
        live = context.load(store, artifacts, RUN, run, turn, 5)
        queries.append(store.reads() - before)
        if turn and turn % 5 == 0:
            context.write_snapshot(store, artifacts, RUN, live)
        if turn and turn % 4 == 0 and turn - 2 > live.start:
            live.summarize_upto(context.record_summary(store, RUN, turn, {"upto_turn": turn - 2, "text": f"up to {turn - 2}"}))
            context.remember(store, RUN, live)
        turn_with(store, turn, BODY)
    assert queries[1:] == [1] * 29  # one Query a turn (the warm cache's new records), never a holder's read
    shared = [s for s in store.steps(RUN) if s.kind == "tool" and s.holder]
    assert len(shared) >= 20  # most turns' records are references
    context.forget_cache()
    cold = context.load(store, artifacts, RUN, run_record(store), 29, 5)
    assert all(slot["tools"][0] == result(BODY) for slot in cold.turns.values())


def test_a_reference_whose_holder_holds_a_reference_is_reported_not_read_as_content():
    from longstep.store import StepRecord

    # A reference to a record that itself holds a reference (what a stale cache once wrote): the
    # reader reports it, never hands the model ``{"same_as": ...}`` as the tool's result.
    record = StepRecord(sk=keys.tool_step_key(2, 0), kind="tool", name="read", result={outputs.SAME_AS: keys.tool_step_key(1, 0)})
    held = {keys.tool_step_key(1, 0): {outputs.SAME_AS: keys.tool_step_key(0, 0)}}
    with pytest.raises(StepRecordLostError, match="repeats the result of step#000001#tool#000"):
        outputs.resolved(record, held, RUN)
    assert outputs.resolved(record, held, None) is record  # within a read: left for the store to read
