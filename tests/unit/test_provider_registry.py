"""Providers by name and by configuration; per-agent model settings and the start input's override; keys from Secrets Manager."""

from __future__ import annotations

import json
import sys
import types

import boto3
import pytest
from moto import mock_aws

from longstep import clients
from longstep.agent import Agent
from longstep.errors import ModelAccessError
from longstep.models import secrets
from longstep.models.anthropic import AnthropicMessagesProvider
from longstep.models.bedrock import BedrockConverseProvider
from longstep.models.openai_compat import OpenAIChatProvider
from longstep.models.registry import ENV_MODEL_PROVIDERS, UnknownProviderError, build_provider, parse_providers
from longstep.models.settings import ModelSettings, resolve
from longstep.tools.registry import ToolRegistry

DEFAULT = "us.anthropic.claude-sonnet-4-6"


def env(**providers):
    return {ENV_MODEL_PROVIDERS: json.dumps(providers), "AWS_DEFAULT_REGION": "us-east-1"}


# -- resolution -----------------------------------------------------------------------------------


def test_defaults_are_bedrock_with_the_stack_model():
    model = resolve(None, None, DEFAULT)
    assert (model.provider, model.model_id, model.temperature, model.max_tokens) == ("bedrock", DEFAULT, 0.0, 4096)


def test_agent_settings_apply_and_the_start_input_overrides_field_by_field():
    agent = ModelSettings(provider="anthropic", model_id="claude-sonnet-4-6", temperature=0.4, max_tokens=2000)
    assert resolve({}, agent, DEFAULT).model_dump() == {
        "provider": "anthropic",
        "model_id": "claude-sonnet-4-6",
        "temperature": 0.4,
        "max_tokens": 2000,
    }
    over = resolve({"temperature": 0.0, "max_tokens": 800, "provider": None}, agent, DEFAULT)
    assert (over.provider, over.model_id, over.temperature, over.max_tokens) == ("anthropic", "claude-sonnet-4-6", 0.0, 800)


def test_another_provider_in_the_start_input_does_not_inherit_the_agents_model_id():
    agent = ModelSettings(provider="anthropic", model_id="claude-sonnet-4-6")
    assert resolve({"provider": "bedrock"}, agent, DEFAULT).model_id == DEFAULT
    assert resolve({"provider": "openai"}, agent, DEFAULT).model_id is None


def test_agent_carries_model_settings():
    agent = Agent(name="a", system_prompt="s", tools=ToolRegistry(), model=ModelSettings(model_id="m", max_tokens=10))
    assert agent.model.max_tokens == 10
    assert Agent(name="b", system_prompt="s", tools=ToolRegistry()).model == ModelSettings()


def test_model_settings_reject_bad_values():
    with pytest.raises(ValueError, match="temperature"):
        ModelSettings(temperature=3)


# -- registry ---------------------------------------------------------------------------------------


def test_bedrock_is_built_with_the_resolved_settings():
    provider = build_provider({"max_tokens": 100}, ModelSettings(temperature=0.3), DEFAULT, environ={})
    assert isinstance(provider, BedrockConverseProvider)
    assert (provider.model_id, provider.max_tokens, provider.temperature) == (DEFAULT, 100, 0.3)


def test_anthropic_and_openai_are_built_with_their_configuration():
    environ = env(
        anthropic={"secret_id": "longstep/anthropic"},
        openai={"secret_id": "longstep/openai", "base_url": "https://gw.example.com/v1", "options": {"max_tokens_field": "max_tokens"}},
    )
    anthropic = build_provider({"provider": "anthropic", "model_id": "claude-sonnet-4-6"}, None, DEFAULT, environ)
    assert isinstance(anthropic, AnthropicMessagesProvider) and anthropic.base_url == "https://api.anthropic.com"
    openai = build_provider({}, ModelSettings(provider="openai", model_id="gpt-4.1"), DEFAULT, environ)
    assert isinstance(openai, OpenAIChatProvider)
    assert (openai.base_url, openai.max_tokens_field, openai.api_key is not None) == ("https://gw.example.com/v1", "max_tokens", True)


def test_a_user_provider_is_added_by_configuration(monkeypatch):
    module = types.ModuleType("my_llm_for_test")
    built = []

    def build(spec):
        built.append(spec)
        return "a provider"

    module.build = build
    monkeypatch.setitem(sys.modules, "my_llm_for_test", module)
    environ = env(local={"factory": "my_llm_for_test:build", "base_url": "http://10.0.0.5:8000/v1"})
    assert build_provider({"provider": "local", "model_id": "llama"}, None, DEFAULT, environ) == "a provider"
    (spec,) = built
    assert (spec.name, spec.model.model_id, spec.config.base_url) == ("local", "llama", "http://10.0.0.5:8000/v1")
    with pytest.raises(UnknownProviderError, match="local.secret_id"):
        spec.api_key()


@pytest.mark.parametrize(
    "raw, field",
    [
        ("not json", "is not JSON"),
        ("[]", "JSON object"),
        (json.dumps({"mine": {}}), "mine.factory"),
        (json.dumps({"mine": {"factory": "no colon"}}), "mine.factory"),
        (json.dumps({"openai": {"base_url": "ftp://x"}}), "openai.base_url"),
        (json.dumps({"openai": {"secretid": "x"}}), "openai.secretid"),
        (json.dumps({"Bad Name": {}}), "bad provider name"),
    ],
)
def test_bad_configuration_is_named(raw, field):
    with pytest.raises(UnknownProviderError, match=field):
        parse_providers(raw)


def test_unknown_provider_and_missing_model_id_are_named():
    with pytest.raises(UnknownProviderError, match="model.provider: unknown provider 'nope'"):
        build_provider({"provider": "nope"}, None, DEFAULT, environ={})
    with pytest.raises(UnknownProviderError, match="model.model_id: required for provider 'openai'"):
        build_provider({"provider": "openai"}, None, DEFAULT, environ={})
    with pytest.raises(UnknownProviderError, match="module 'absent_module_x' not found"):
        build_provider({"provider": "x", "model_id": "m"}, None, DEFAULT, env(x={"factory": "absent_module_x:build"}))


# -- keys from Secrets Manager -------------------------------------------------------------------


@pytest.fixture
def secretsmanager(monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        clients.reset()
        secrets.forget()
        yield boto3.client("secretsmanager", region_name="us-east-1")
        clients.reset()
        secrets.forget()


def test_the_key_is_read_once_per_process(secretsmanager, monkeypatch):
    secretsmanager.create_secret(Name="longstep/anthropic", SecretString="sk-ant-1")
    reads = []
    real = clients.client("secretsmanager")
    original = real.get_secret_value
    monkeypatch.setattr(real, "get_secret_value", lambda **kw: reads.append(kw) or original(**kw))
    assert secrets.api_key("longstep/anthropic") == "sk-ant-1"
    secretsmanager.put_secret_value(SecretId="longstep/anthropic", SecretString="sk-ant-2")
    assert secrets.api_key("longstep/anthropic") == "sk-ant-1"
    assert reads == [{"SecretId": "longstep/anthropic"}]


def test_a_json_secret_holds_the_key_under_api_key(secretsmanager):
    secretsmanager.create_secret(Name="k", SecretString=json.dumps({"api_key": "sk-2", "note": "x"}))
    assert secrets.api_key("k") == "sk-2"


@pytest.mark.parametrize("value", ["", "{}", '{"api_key": ""}'])
def test_an_empty_secret_is_a_model_access_error(secretsmanager, value):
    secretsmanager.create_secret(Name="empty", SecretString=value or " ")
    with pytest.raises(ModelAccessError, match="secret_id"):
        secrets.api_key("empty")


def test_a_missing_secret_is_a_model_access_error(secretsmanager):
    with pytest.raises(ModelAccessError, match="secret_id: cannot read secret 'absent'"):
        secrets.api_key("absent")
