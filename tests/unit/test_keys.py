"""Checkpoint sort keys: zero padding keeps a run's steps in execution order."""

from longstep import keys


def test_model_key_sorts_before_the_tools_of_its_turn():
    model = keys.model_step_key(3)
    tools = [keys.tool_step_key(3, c) for c in range(5)]
    assert sorted([*reversed(tools), model]) == [model, *tools]


def test_turns_sort_numerically_not_lexically():
    ordered = [keys.model_step_key(t) for t in (1, 2, 9, 10, 11, 100, 999_999)]
    assert sorted(ordered) == ordered


def test_tool_calls_sort_numerically_within_a_turn():
    ordered = [keys.tool_step_key(0, c) for c in (0, 1, 2, 9, 10, 99, 100)]
    assert sorted(ordered) == ordered


def test_all_tools_of_a_turn_sort_before_the_next_turn():
    assert keys.tool_step_key(4, 999) < keys.model_step_key(5)


def test_step_keys_share_the_step_prefix_and_others_do_not():
    for sk in (keys.model_step_key(0), keys.tool_step_key(0, 0)):
        assert sk.startswith(keys.STEP_PREFIX)
    for sk in (keys.intent_key(0, 0), keys.approval_key(0, 0), keys.RUN_RECORD, keys.FINAL_RECORD):
        assert not sk.startswith(keys.STEP_PREFIX)


def test_idempotency_keys_distinguish_model_and_tool_steps():
    assert keys.idempotency_key("r", 1) != keys.idempotency_key("r", 1, 0)
    assert keys.idempotency_key("r", 1, 0) != keys.idempotency_key("r", 1, 1)
    assert keys.idempotency_key("r", 1, 0).startswith("r:")


def test_checkpoint_table_schema_has_hash_and_range():
    schema = keys.checkpoint_table()
    types = {k["KeyType"]: k["AttributeName"] for k in schema.key_schema()}
    assert types == {"HASH": schema.partition_key, "RANGE": schema.sort_key}
    index_keys = {name for index in schema.indexes for name in (index.partition_key, index.sort_key)}
    assert {d["AttributeName"] for d in schema.attribute_definitions()} == {schema.partition_key, schema.sort_key, *index_keys}
    # One index: CloudFormation adds at most one global secondary index to a table per update.
    assert [i.name for i in schema.indexes] == [keys.RUNS_INDEX]


def test_hash_only_tables_have_one_key():
    for schema in (keys.idempotency_table(),):
        assert [k["KeyType"] for k in schema.key_schema()] == ["HASH"]
        assert all(d["AttributeType"] == "S" for d in schema.attribute_definitions())


# -- parsers: every key format taken apart again ------------------------------------------------

import pytest  # noqa: E402


@pytest.mark.parametrize(
    ("sk", "parsed"),
    [
        (keys.model_step_key(7), keys.SortKey(kind="model", turn=7)),
        (keys.tool_step_key(7, 12), keys.SortKey(kind="tool", turn=7, call=12)),
        (keys.snapshot_key(50), keys.SortKey(kind="context", turn=50)),
        (keys.summary_key(51), keys.SortKey(kind="summary", turn=51)),
        (keys.intent_key(3, 1), keys.SortKey(kind="intent", turn=3, call=1)),
        (keys.approval_key(3, 2), keys.SortKey(kind="approval", turn=3, call=2)),
        (keys.escalation_key(4, -1), keys.SortKey(kind="escalation", turn=4, call=-1)),
        (keys.escalation_key(4, 0), keys.SortKey(kind="escalation", turn=4, call=0)),
        (keys.signal_key("ci.finished"), keys.SortKey(kind="signal", event="ci.finished")),
        (keys.signal_entry_key("ci.finished", 2), keys.SortKey(kind="signal", event="ci.finished", seq=2)),
        (keys.RUN_RECORD, keys.SortKey(kind="run")),
        (keys.FINAL_RECORD, keys.SortKey(kind="final")),
    ],
)
def test_every_sort_key_parses_back_to_what_made_it(sk, parsed):
    assert keys.parse(sk) == parsed


@pytest.mark.parametrize("turn", [0, 1, 49, 50, 999_999])
def test_step_key_round_trips(turn):
    for call in (0, 7, 999):
        key = keys.parse(keys.tool_step_key(turn, call))
        assert keys.tool_step_key(key.turn, key.call) == keys.tool_step_key(turn, call)
    assert keys.model_step_key(keys.parse(keys.model_step_key(turn)).turn) == keys.model_step_key(turn)


@pytest.mark.parametrize("sk", ["", "step#", "step#abc#model", "step#000001#tool", "step#000001#other", "intent#000001", "nope#1#2"])
def test_a_malformed_sort_key_is_a_typed_error(sk):
    with pytest.raises(keys.SortKeyError, match="sk:"):
        keys.parse(sk)


def test_only_model_and_tool_records_are_steps():
    assert keys.parse(keys.model_step_key(1)).is_step and keys.parse(keys.tool_step_key(1, 0)).is_step
    assert not keys.parse(keys.snapshot_key(1)).is_step and not keys.parse(keys.summary_key(1)).is_step


def test_a_snapshot_sorts_before_its_turn_and_after_the_previous_one():
    turn_four = [keys.model_step_key(4), keys.summary_key(4), keys.tool_step_key(4, 0)]
    assert keys.tool_step_key(3, 999) < keys.turn_key(4) < keys.snapshot_key(4) < min(turn_four)
    assert max(turn_four) < keys.turn_key(5)


def test_approval_run_call_round_trips():
    assert keys.parse_approval_run_call(keys.approval_run_call("run-1", 12, 3)) == ("run-1", 12, 3)
