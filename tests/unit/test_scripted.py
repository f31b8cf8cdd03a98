"""The scripted model provider and its script format."""

import json

import pytest

from longstep.errors import InvalidInputError, ScriptExhaustedError
from longstep.messages import text_of, tool_uses
from longstep.models.base import ModelReply
from longstep.models.scripted import ScriptedProvider, parse_script

SCRIPT = {
    "turns": {
        "0": {
            "text": "let me look",
            "tool_calls": [
                {"name": "search_docs", "input": {"query": "crash"}},
                {"name": "read_document", "input": {"doc_id": "D1"}},
            ],
        },
        "1": {"tool_calls": [{"name": "file_ticket", "input": {"title": "x"}, "id": "custom-id"}], "input_tokens": 7, "output_tokens": 3},
        "2": {"text": "done"},
    }
}


def converse(provider, turn):
    return provider.converse(system="s", messages=[], tools=[], turn=turn)


@pytest.fixture
def provider():
    return ScriptedProvider(parse_script(SCRIPT))


def test_tool_use_ids_are_deterministic_per_turn_and_index(provider):
    reply = converse(provider, 0)
    uses = tool_uses(reply.message)
    assert [u["toolUseId"] for u in uses] == ["t0c0", "t0c1"]
    assert [u["name"] for u in uses] == ["search_docs", "read_document"]
    assert uses[0]["input"] == {"query": "crash"}


def test_explicit_id_wins(provider):
    (use,) = tool_uses(converse(provider, 1).message)
    assert use["toolUseId"] == "custom-id"


def test_a_repeated_turn_gives_the_same_reply(provider):
    first = converse(provider, 0)
    again = converse(ScriptedProvider(parse_script(SCRIPT)), 0)
    assert converse(provider, 0) == first == again
    assert provider.calls == 2


def test_reply_is_an_assistant_message_with_text_first(provider):
    reply = converse(provider, 0)
    assert isinstance(reply, ModelReply)
    assert reply.message["role"] == "assistant"
    assert "text" in reply.message["content"][0]
    assert text_of(reply.message) == "let me look"


def test_stop_reason_is_tool_use_with_calls_and_end_turn_without(provider):
    assert converse(provider, 0).stop_reason == "tool_use"
    assert converse(provider, 1).stop_reason == "tool_use"
    final = converse(provider, 2)
    assert final.stop_reason == "end_turn"
    assert tool_uses(final.message) == []
    assert text_of(final.message) == "done"


def test_usage_reports_scripted_tokens_and_defaults(provider):
    assert converse(provider, 1).usage == {"inputTokens": 7, "outputTokens": 3}
    default = converse(provider, 2).usage
    assert set(default) == {"inputTokens", "outputTokens"}
    assert all(isinstance(v, int) and v >= 0 for v in default.values())


def test_turn_without_text_has_only_tool_uses(provider):
    content = converse(provider, 1).message["content"]
    assert all("toolUse" in block for block in content)


@pytest.mark.parametrize("turn", [3, 99, -1])
def test_missing_turn_raises_script_exhausted(provider, turn):
    with pytest.raises(ScriptExhaustedError, match=str(turn)):
        converse(provider, turn)


def test_reply_round_trips_through_its_record(provider):
    reply = converse(provider, 0)
    record = json.loads(json.dumps(reply.to_record()))
    assert ModelReply.from_record(record) == reply


def test_from_record_defaults_usage():
    reply = ModelReply.from_record({"message": {"role": "assistant", "content": []}, "stop_reason": "end_turn"})
    assert reply.usage == {}


def test_from_json_builds_a_provider():
    provider = ScriptedProvider.from_json(json.dumps(SCRIPT))
    assert converse(provider, 2).stop_reason == "end_turn"


def test_from_json_rejects_non_json():
    with pytest.raises(InvalidInputError, match="not JSON"):
        ScriptedProvider.from_json("{turns:")


@pytest.mark.parametrize(
    "data, path",
    [
        ({}, "turns"),
        ({"turns": {"0": {"tool_calls": [{"name": ""}]}}}, "turns.0.tool_calls.0.name"),
        ({"turns": {"0": {"tool_calls": [{"input": {}}]}}}, "turns.0.tool_calls.0.name"),
        ({"turns": {"0": {"tool_calls": [{"name": "x", "input": [1]}]}}}, "turns.0.tool_calls.0.input"),
        ({"turns": {"0": {"bogus": 1}}}, "turns.0.bogus"),
        ({"turns": {"0": {"output_tokens": -5}}}, "turns.0.output_tokens"),
        ({"turns": {"first": {}}}, "turns.first"),
        ({"turns": {}, "extra": 1}, "extra"),
    ],
)
def test_parse_script_errors_name_the_field(data, path):
    with pytest.raises(InvalidInputError) as info:
        parse_script(data)
    assert path in str(info.value)
    assert "model script" in str(info.value)


def test_parse_script_rejects_a_non_object():
    with pytest.raises(InvalidInputError):
        parse_script([{"text": "hi"}])
