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
    assert {d["AttributeName"] for d in schema.attribute_definitions()} == {schema.partition_key, schema.sort_key}


def test_hash_only_tables_have_one_key():
    for schema in (keys.idempotency_table(),):
        assert [k["KeyType"] for k in schema.key_schema()] == ["HASH"]
        assert all(d["AttributeType"] == "S" for d in schema.attribute_definitions())
