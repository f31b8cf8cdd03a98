"""BedrockConverseProvider against the real bedrock-runtime service model, via botocore's Stubber."""

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ParamValidationError, ReadTimeoutError
from botocore.stub import ANY, Stubber

from agents import triage
from longstep.errors import ModelAccessError, ServiceUnavailableError, ThrottledError
from longstep.models.bedrock import BedrockConverseProvider

MODEL_ID = "anthropic.claude-3-5-sonnet-20240620-v1:0"
MESSAGES = [
    {"role": "user", "content": [{"text": "triage the backlog"}]},
    {
        "role": "assistant",
        "content": [{"toolUse": {"toolUseId": "t0c0", "name": "search_docs", "input": {"query": "crash"}}}],
    },
    {
        "role": "user",
        "content": [{"toolResult": {"toolUseId": "t0c0", "content": [{"json": {"results": []}}], "status": "success"}}],
    },
]
REPLY_MESSAGE = {
    "role": "assistant",
    "content": [
        {"text": "filing"},
        {"toolUse": {"toolUseId": "tooluse_1", "name": "file_ticket", "input": {"title": "crash on save"}}},
    ],
}


def response(message=REPLY_MESSAGE, stop="tool_use", usage=None):
    return {
        "output": {"message": message},
        "stopReason": stop,
        "usage": usage or {"inputTokens": 120, "outputTokens": 30, "totalTokens": 150},
        "metrics": {"latencyMs": 42},
    }


@pytest.fixture
def client():
    client = boto3.client("bedrock-runtime", region_name="us-east-1")
    with Stubber(client) as stubber:
        client.stubber = stubber
        yield client
        stubber.assert_no_pending_responses()


def test_request_carries_model_messages_system_and_tool_specs(client):
    tools = triage.registry.specs()
    client.stubber.add_response(
        "converse",
        response(),
        expected_params={
            "modelId": MODEL_ID,
            "messages": MESSAGES,
            "system": [{"text": triage.SYSTEM_PROMPT}],
            "toolConfig": {"tools": tools},
            "inferenceConfig": {"maxTokens": 512, "temperature": 0.5},
        },
    )
    provider = BedrockConverseProvider(MODEL_ID, client=client, max_tokens=512, temperature=0.5)
    provider.converse(system=triage.SYSTEM_PROMPT, messages=MESSAGES, tools=tools, turn=1)


def test_tool_config_holds_a_tool_spec_per_registered_tool():
    tools = triage.registry.specs()
    kwargs = BedrockConverseProvider(MODEL_ID).request(system="s", messages=MESSAGES, tools=tools)
    entries = kwargs["toolConfig"]["tools"]
    assert [e["toolSpec"]["name"] for e in entries] == sorted(triage.registry.tools)
    assert all(set(e["toolSpec"]) == {"name", "description", "inputSchema"} for e in entries)


def test_no_system_and_no_tools_are_left_out(client):
    client.stubber.add_response(
        "converse",
        response(message={"role": "assistant", "content": [{"text": "hi"}]}, stop="end_turn"),
        expected_params={"modelId": MODEL_ID, "messages": MESSAGES[:1], "inferenceConfig": ANY},
    )
    BedrockConverseProvider(MODEL_ID, client=client).converse(system="", messages=MESSAGES[:1], tools=[], turn=0)


def test_reply_maps_to_model_reply(client):
    client.stubber.add_response("converse", response(), expected_params=None)
    reply = BedrockConverseProvider(MODEL_ID, client=client).converse(system="s", messages=MESSAGES, tools=[], turn=1)
    assert reply.message == REPLY_MESSAGE
    assert reply.stop_reason == "tool_use"
    assert reply.usage == {"inputTokens": 120, "outputTokens": 30, "totalTokens": 150}


def test_end_turn_reply_and_extra_usage_fields(client):
    client.stubber.add_response(
        "converse",
        response(
            message={"role": "assistant", "content": [{"text": "all done"}]},
            stop="end_turn",
            usage={"inputTokens": 5, "outputTokens": 6, "totalTokens": 11, "cacheReadInputTokens": 2},
        ),
    )
    reply = BedrockConverseProvider(MODEL_ID, client=client).converse(system="s", messages=MESSAGES[:1], tools=[], turn=0)
    assert reply.stop_reason == "end_turn"
    assert reply.usage["totalTokens"] == 11
    assert all(isinstance(v, int) for v in reply.usage.values())
    assert reply.to_record()["message"]["content"] == [{"text": "all done"}]


def test_a_malformed_message_fails_service_model_validation():
    # Guards the stub itself: parameters are checked against the real service model.
    client = boto3.client("bedrock-runtime", region_name="us-east-1")
    with Stubber(client) as stubber:
        stubber.add_response("converse", response())
        provider = BedrockConverseProvider(MODEL_ID, client=client)
        with pytest.raises(ParamValidationError):
            provider.converse(system="s", messages=[{"role": "user", "content": "not a list"}], tools=[], turn=0)


@pytest.mark.parametrize(
    "code, status, expected",
    [
        ("ThrottlingException", 429, ThrottledError),
        ("ServiceUnavailableException", 503, ServiceUnavailableError),
        ("InternalServerException", 500, ServiceUnavailableError),
        ("ModelNotReadyException", 429, ThrottledError),
        ("ModelTimeoutException", 408, ServiceUnavailableError),
        ("AccessDeniedException", 403, ModelAccessError),
        ("ValidationException", 400, ModelAccessError),
        ("ResourceNotFoundException", 404, ModelAccessError),
    ],
)
def test_client_errors_are_classified(client, code, status, expected):
    client.stubber.add_client_error("converse", service_error_code=code, service_message="nope", http_status_code=status)
    provider = BedrockConverseProvider(MODEL_ID, client=client)
    with pytest.raises(expected) as info:
        provider.converse(system="s", messages=MESSAGES[:1], tools=[], turn=0)
    assert code in str(info.value)
    assert info.value.__cause__ is not None  # the original ClientError is kept for debugging


def test_client_is_created_lazily():
    provider = BedrockConverseProvider(MODEL_ID)
    assert provider._client is None
    assert provider.client.meta.service_model.service_name == "bedrock-runtime"
    assert provider.client is provider.client


def test_read_timeout_becomes_service_unavailable():
    client = boto3.client("bedrock-runtime", region_name="us-east-1", config=Config(retries={"total_max_attempts": 1}))

    def timeout(request, **kwargs):
        raise ReadTimeoutError(endpoint_url=request.url)

    client.meta.events.register("before-send.bedrock-runtime.Converse", timeout)
    with pytest.raises(ServiceUnavailableError):
        BedrockConverseProvider(MODEL_ID, client=client).converse(system="s", messages=MESSAGES[:1], tools=[], turn=0)


def test_the_shared_client_has_a_long_read_timeout_and_few_standard_retries(monkeypatch):
    from longstep import clients
    from longstep.models import bedrock

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    clients.reset()
    try:
        client = BedrockConverseProvider(MODEL_ID).client
        assert client is bedrock.bedrock_runtime_client()
        config = client.meta.config
        assert config.read_timeout == bedrock.BEDROCK_READ_TIMEOUT_SECONDS >= 900  # above any reply the 900 s function can wait for
        assert config.retries["mode"] == "standard"
        assert config.retries["total_max_attempts"] == bedrock.BEDROCK_MAX_ATTEMPTS <= 2
    finally:
        clients.reset()


@pytest.mark.parametrize("stop", ["guardrail_intervened", "content_filtered", "malformed_tool_use", "model_context_window_exceeded"])
def test_converse_stop_reasons_pass_through_normalized(client, stop):
    client.stubber.add_response("converse", response(message={"role": "assistant", "content": [{"text": "x"}]}, stop=stop))
    reply = BedrockConverseProvider(MODEL_ID, client=client).converse(system="s", messages=MESSAGES[:1], tools=[], turn=0)
    assert reply.stop_reason == stop
