"""Start input, cursor and tool-call item validation through inputs.parse_model."""

import pytest

from longstep.errors import InvalidInputError
from longstep.inputs import ModelChoice, StartInput, parse_model
from longstep.contract.call import CallItem
from longstep.contract.cursor import Cursor


def valid(**overrides):
    data = {"run_id": "run-1", "goal": "triage the backlog", "agent": "triage"}
    data.update(overrides)
    return data


def bad(data, model=StartInput, what="start input"):
    with pytest.raises(InvalidInputError) as info:
        parse_model(model, data, what)
    return str(info.value)


def test_valid_start_input_parses_with_defaults():
    start = parse_model(StartInput, valid(), "start input")
    assert start.run_id == "run-1"
    assert start.max_turns is None
    assert start.model.provider is None  # the agent's provider, else bedrock (models.settings.resolve)
    assert start.model.script_uri is None


@pytest.mark.parametrize("run_id", ["a", "A_b-9", "x" * 64])
def test_run_id_accepts_execution_name_characters(run_id):
    assert parse_model(StartInput, valid(run_id=run_id), "start input").run_id == run_id


@pytest.mark.parametrize("run_id", ["", "x" * 65, "has space", "slash/run", "dot.run", "ünï"])
def test_run_id_rejects_bad_values_and_names_the_field(run_id):
    msg = bad(valid(run_id=run_id))
    assert "run_id" in msg
    assert msg.startswith("invalid start input")


def test_run_id_rejects_trailing_newline():
    assert "run_id" in bad(valid(run_id="run-1\n"))


def test_missing_run_id_is_named():
    data = valid()
    del data["run_id"]
    assert "run_id" in bad(data)


@pytest.mark.parametrize("goal", ["", "g" * 20_001])
def test_goal_length_is_checked_and_named(goal):
    assert "goal" in bad(valid(goal=goal))


def test_missing_agent_is_named():
    data = valid()
    del data["agent"]
    msg = bad(data)
    assert "agent" in msg
    assert "run_id" not in msg


@pytest.mark.parametrize("max_turns", [0, -1, 10_001, "many"])
def test_max_turns_bounds_are_named(max_turns):
    assert "max_turns" in bad(valid(max_turns=max_turns))


def test_extra_field_is_forbidden_and_named():
    msg = bad(valid(colour="blue"))
    assert "colour" in msg
    assert "Extra inputs are not permitted" in msg


def test_extra_field_in_model_is_forbidden_with_dotted_path():
    assert "model.top_k" in bad(valid(model={"provider": "bedrock", "top_k": 1}))


@pytest.mark.parametrize("field, value", [("temperature", 2.5), ("temperature", -0.1), ("max_tokens", 0)])
def test_model_settings_out_of_range_are_named(field, value):
    assert f"model.{field}" in bad(valid(model={field: value}))


def test_model_settings_override_fields_parse():
    start = parse_model(StartInput, valid(model={"provider": "openai", "model_id": "gpt-x", "temperature": 0.3, "max_tokens": 900}), "start input")
    assert (start.model.provider, start.model.model_id, start.model.temperature, start.model.max_tokens) == ("openai", "gpt-x", 0.3, 900)


def test_script_uri_must_be_s3_and_is_named_by_dotted_path():
    msg = bad(valid(model={"provider": "scripted", "script_uri": "https://example.com/s.json"}))
    assert "model.script_uri" in msg
    assert "s3://" in msg


def test_malformed_provider_name_is_named():
    # Well-formed names are checked against the registry when the model is called (models.registry).
    assert "model.provider" in bad(valid(model={"provider": "Open AI!"}))


def test_every_bad_field_is_reported_at_once():
    msg = bad({"run_id": "bad id", "goal": "", "agent": "triage", "extra": 1})
    for field in ("run_id", "goal", "extra"):
        assert field in msg


@pytest.mark.parametrize("data", [None, [], "run-1", 42])
def test_non_object_input_is_rejected(data):
    msg = bad(data)
    assert "must be a JSON object" in msg
    assert type(data).__name__ in msg


def test_what_label_appears_in_the_message():
    assert "invalid tool call input" in bad({}, CallItem, "tool call input")


def test_scripted_model_requires_script_uri():
    msg = bad(valid(model={"provider": "scripted"}))
    assert "script_uri" in msg
    assert "model" in msg


def test_model_choice_scripted_with_uri_is_valid():
    choice = ModelChoice(provider="scripted", script_uri="s3://bucket/script.json")
    assert choice.script_uri == "s3://bucket/script.json"


def test_model_choice_scripted_with_empty_uri_is_invalid():
    with pytest.raises(ValueError, match="script_uri"):
        ModelChoice(provider="scripted", script_uri="")


def test_bedrock_needs_no_script():
    assert ModelChoice(provider="bedrock", model_id="m").script_uri is None


def test_cursor_rejects_negative_turn_and_ignores_extras():
    assert "next_turn" in bad({"run_id": "r", "next_turn": -1}, Cursor, "cursor")
    cursor = parse_model(Cursor, {"run_id": "r", "next_turn": 2, "route": "tools"}, "cursor")
    assert cursor.next_turn == 2


def test_tool_call_item_defaults_and_bounds():
    item = parse_model(CallItem, {"run_id": "r", "turn": 0, "call": 1, "tool": "t", "extra": 1}, "item")
    assert item.approval is False and item.decision is None
    msg = bad({"run_id": "r", "turn": 0, "call": -1, "tool": "t"}, CallItem, "item")
    assert "call" in msg
