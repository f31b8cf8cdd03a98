"""The Anthropic Messages and OpenAI-compatible providers against recorded HTTP responses (no network)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from longstep.errors import ModelAccessError, ServiceUnavailableError, ThrottledError
from longstep.models.anthropic import AnthropicMessagesProvider
from longstep.models.http import HttpRequest, HttpResponse
from longstep.models.openai_compat import OpenAIChatProvider

RECORDED = Path(__file__).resolve().parents[1] / "recorded"
TOOLS = [
    {
        "toolSpec": {
            "name": "file_ticket",
            "description": "File a ticket.",
            "inputSchema": {"json": {"type": "object", "properties": {"title": {"type": "string"}}}},
        }
    }
]
MESSAGES = [
    {"role": "user", "content": [{"text": "triage the backlog"}]},
    {"role": "assistant", "content": [{"text": "searching"}, {"toolUse": {"toolUseId": "t0c0", "name": "search_docs", "input": {"query": "crash"}}}]},
    {"role": "user", "content": [{"toolResult": {"toolUseId": "t0c0", "content": [{"json": {"results": []}}], "status": "error"}}]},
    {"role": "user", "content": [{"text": "Your reply was empty."}]},
]


class Replay:
    """A transport that answers with a recorded response and keeps the requests it was sent."""

    def __init__(self, name: str) -> None:
        recorded = json.loads((RECORDED / name).read_text())
        self.response = HttpResponse(recorded["status"], json.dumps(recorded["body"]).encode())
        self.sent: list[HttpRequest] = []

    def __call__(self, request: HttpRequest) -> HttpResponse:
        self.sent.append(request)
        return self.response


def anthropic(name: str) -> tuple[AnthropicMessagesProvider, Replay]:
    replay = Replay(f"anthropic/{name}.json")
    return AnthropicMessagesProvider("claude-sonnet-4-6", lambda: "sk-ant-test", max_tokens=512, temperature=0.2, transport=replay), replay


def openai(name: str, **kwargs) -> tuple[OpenAIChatProvider, Replay]:
    replay = Replay(f"openai/{name}.json")
    return OpenAIChatProvider("gpt-4.1", lambda: "sk-test", max_tokens=512, temperature=0.2, transport=replay, **kwargs), replay


# -- Anthropic Messages ------------------------------------------------------------------------


def test_anthropic_request_translates_messages_tools_and_headers():
    provider, replay = anthropic("tool_use")
    provider.converse(system="be brief", messages=MESSAGES, tools=TOOLS, turn=1)
    (sent,) = replay.sent
    assert sent.url == "https://api.anthropic.com/v1/messages"
    assert sent.headers == {"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"}
    body = sent.body
    assert (body["model"], body["max_tokens"], body["temperature"], body["system"]) == ("claude-sonnet-4-6", 512, 0.2, "be brief")
    assert body["tools"] == [{"name": "file_ticket", "description": "File a ticket.", "input_schema": TOOLS[0]["toolSpec"]["inputSchema"]["json"]}]
    assert body["messages"][1]["content"][1] == {"type": "tool_use", "id": "t0c0", "name": "search_docs", "input": {"query": "crash"}}
    result = body["messages"][2]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "t0c0" and result["is_error"] is True
    assert json.loads(result["content"][0]["text"]) == {"results": []}


def test_anthropic_tool_use_reply_becomes_converse_blocks():
    provider, _ = anthropic("tool_use")
    reply = provider.converse(system="", messages=MESSAGES[:1], tools=TOOLS, turn=0)
    assert reply.stop_reason == "tool_use"
    assert reply.message["content"] == [
        {"text": "I'll file a ticket for the crash."},
        {"toolUse": {"toolUseId": "toolu_01A09q90qw90lq917835lq9", "name": "file_ticket", "input": {"title": "crash on save"}}},
    ]
    assert reply.usage == {"inputTokens": 2095, "outputTokens": 503, "totalTokens": 2598}


@pytest.mark.parametrize(
    "name, stop",
    [("end_turn", "end_turn"), ("max_tokens", "max_tokens"), ("refusal", "refusal"), ("context_window_exceeded", "model_context_window_exceeded")],
)
def test_anthropic_stop_reasons_are_normalized(name, stop):
    reply = anthropic(name)[0].converse(system="", messages=MESSAGES[:1], tools=[], turn=0)
    assert reply.stop_reason == stop


def test_anthropic_temperature_is_capped_at_its_api_range():
    provider = AnthropicMessagesProvider("claude-sonnet-4-6", lambda: "k", temperature=1.5, transport=Replay("anthropic/end_turn.json"))
    assert provider.request(system="", messages=MESSAGES[:1], tools=[])["temperature"] == 1.0


@pytest.mark.parametrize(
    "name, error",
    [("overloaded_529", ServiceUnavailableError), ("rate_limit_429", ThrottledError), ("authentication_401", ModelAccessError)],
)
def test_anthropic_errors_are_classified(name, error):
    provider, _ = anthropic(name)
    with pytest.raises(error) as info:
        provider.converse(system="", messages=MESSAGES[:1], tools=[], turn=0)
    assert f"HTTP {name.rsplit('_', 1)[1]}" in str(info.value)


# -- OpenAI-compatible Chat Completions -----------------------------------------------------------


def test_openai_request_translates_messages_tools_and_headers():
    provider, replay = openai("tool_calls")
    provider.converse(system="be brief", messages=MESSAGES, tools=TOOLS, turn=1)
    (sent,) = replay.sent
    assert sent.url == "https://api.openai.com/v1/chat/completions"
    assert sent.headers == {"authorization": "Bearer sk-test"}
    chat = sent.body["messages"]
    assert [m["role"] for m in chat] == ["system", "user", "assistant", "tool", "user"]
    assert chat[2]["tool_calls"] == [{"id": "t0c0", "type": "function", "function": {"name": "search_docs", "arguments": '{"query": "crash"}'}}]
    assert chat[3]["tool_call_id"] == "t0c0" and chat[3]["content"].startswith("ERROR: ")
    assert sent.body["max_completion_tokens"] == 512 and "max_tokens" not in sent.body
    assert sent.body["tools"][0] == {
        "type": "function",
        "function": {"name": "file_ticket", "description": "File a ticket.", "parameters": TOOLS[0]["toolSpec"]["inputSchema"]["json"]},
    }


def test_openai_base_url_and_token_field_are_configurable_and_key_optional():
    replay = Replay("openai/stop.json")
    provider = OpenAIChatProvider("llama", None, base_url="http://10.0.0.5:8000/v1/", max_tokens_field="max_tokens", transport=replay)
    provider.converse(system="", messages=MESSAGES[:1], tools=[], turn=0)
    assert replay.sent[0].url == "http://10.0.0.5:8000/v1/chat/completions"
    assert replay.sent[0].headers == {} and replay.sent[0].body["max_tokens"] == 4096


def test_openai_tool_calls_reply_becomes_converse_blocks():
    reply = openai("tool_calls")[0].converse(system="", messages=MESSAGES[:1], tools=TOOLS, turn=0)
    assert reply.stop_reason == "tool_use" and reply.provider_stop == "tool_calls"
    assert reply.message["content"] == [
        {"toolUse": {"toolUseId": "call_DdmO9pD3xa9XTPNJ32zg2hcA", "name": "file_ticket", "input": {"title": "crash on save"}}}
    ]
    assert reply.usage == {"inputTokens": 1117, "outputTokens": 46, "totalTokens": 1163}
    assert reply.to_record()["provider_stop"] == "tool_calls"


@pytest.mark.parametrize(
    "name, stop",
    [
        ("stop", "end_turn"),
        ("length", "max_tokens"),
        ("content_filter", "content_filtered"),
        ("refusal", "refusal"),
        ("malformed_arguments", "malformed_tool_use"),
    ],
)
def test_openai_finish_reasons_are_normalized(name, stop):
    reply = openai(name)[0].converse(system="", messages=MESSAGES[:1], tools=TOOLS, turn=0)
    assert reply.stop_reason == stop


def test_openai_malformed_arguments_drop_the_call():
    reply = openai("malformed_arguments")[0].converse(system="", messages=MESSAGES[:1], tools=TOOLS, turn=0)
    assert reply.message["content"] == []


def test_openai_refusal_text_is_kept():
    reply = openai("refusal")[0].converse(system="", messages=MESSAGES[:1], tools=[], turn=0)
    assert reply.message["content"] == [{"text": "I'm sorry, I can't help with that request."}]


@pytest.mark.parametrize(
    "name, error",
    [("rate_limit_429", ThrottledError), ("server_error_503", ServiceUnavailableError), ("invalid_key_401", ModelAccessError)],
)
def test_openai_errors_are_classified(name, error):
    provider, _ = openai(name)
    with pytest.raises(error, match="invalid_api_key|rate_limit_exceeded|server_error"):
        provider.converse(system="", messages=MESSAGES[:1], tools=[], turn=0)


def test_a_body_that_is_not_json_is_transient():
    provider = OpenAIChatProvider("m", None, transport=lambda request: HttpResponse(200, b"<html>bad gateway</html>"))
    with pytest.raises(ServiceUnavailableError, match="not JSON"):
        provider.converse(system="", messages=MESSAGES[:1], tools=[], turn=0)


def test_summaries_use_the_provider_without_tools():
    provider, replay = anthropic("end_turn")
    assert provider.summarize(previous="old", outline="turn 3: x", turn=9).startswith("Summary:")
    assert "tools" not in replay.sent[0].body and "old" in replay.sent[0].body["messages"][0]["content"][0]["text"]
