"""Model providers by name: the built-in ones and those a deployment adds by configuration.

``LONGSTEP_MODEL_PROVIDERS`` (set by the stack on the ModelTurn function) is a JSON object of
provider name -> settings::

    {"anthropic": {"secret_id": "longstep/anthropic"},
     "openai":    {"secret_id": "longstep/openai", "base_url": "https://api.openai.com/v1"},
     "local":     {"factory": "agents.my_llm:build", "base_url": "http://10.0.0.5:8000/v1"}}

Built in: ``bedrock`` (Converse; IAM, no key), ``anthropic`` (Messages API) and ``openai`` (an
OpenAI-compatible Chat Completions endpoint), each with its key read from Secrets Manager on first
use (``longstep.models.secrets``). ``scripted`` is served by the runtime from a script in S3.
Another name needs a ``factory``: ``"module:callable"`` (like agents), called with a
:class:`ProviderSpec` and returning an object with ``converse`` and ``summarize``.

Grants: the ModelTurn function needs ``secretsmanager:GetSecretValue`` on every ``secret_id``
configured here (and nothing else does).
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from longstep import environment
from longstep.errors import InvalidInputError, UnknownProviderError  # noqa: F401 - re-exported
from longstep.references import REFERENCE, import_callable
from longstep.settings import ENV_MODEL_PROVIDERS
from longstep.models.base import ModelProvider
from longstep.models.settings import ModelSettings, ResolvedModel, resolve

BUILT_IN = ("bedrock", "anthropic", "openai", "scripted")


class ProviderConfig(BaseModel):
    """One provider's deployment settings.

    Attributes:
        factory: ``module:callable`` building the provider (required for names not built in).
        secret_id: the Secrets Manager secret holding the API key (name or ARN).
        base_url: the API's base URL (the built-in default when omitted).
        options: provider-specific settings (``openai``: ``max_tokens_field``).
        timeout_seconds: the HTTP read timeout.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    factory: str | None = Field(default=None, pattern=REFERENCE.pattern)
    secret_id: str | None = Field(default=None, min_length=1, max_length=2048)
    base_url: str | None = Field(default=None, pattern=r"^https?://")
    options: dict[str, Any] = Field(default_factory=dict)
    timeout_seconds: float = Field(default=600.0, gt=0, le=900)


@dataclass(frozen=True)
class ProviderSpec:
    """What a provider factory is given: the resolved model settings and the provider's config.

    ``api_key()`` reads the configured secret on first use (cached per process); it raises
    ``UnknownProviderError`` when no ``secret_id`` is configured.
    """

    name: str
    model: ResolvedModel
    config: ProviderConfig

    def api_key(self) -> str:
        from longstep.models import secrets

        if not self.config.secret_id:
            raise UnknownProviderError(f"{ENV_MODEL_PROVIDERS}.{self.name}.secret_id: the provider needs an API key secret")
        return secrets.api_key(self.config.secret_id)

    def transport(self) -> Callable[..., Any]:
        """The urllib transport with this provider's timeout."""
        from longstep.models.http import HttpRequest, urllib_transport

        timeout = self.config.timeout_seconds

        def send(request: HttpRequest) -> Any:
            return urllib_transport(HttpRequest(request.url, request.headers, request.body, timeout))

        return send


ProviderFactory = Callable[[ProviderSpec], ModelProvider]

_parsed: dict[str, dict[str, ProviderConfig]] = {}
_lock = threading.Lock()


def parse_providers(raw: str | None) -> dict[str, ProviderConfig]:
    """The provider settings in a ``LONGSTEP_MODEL_PROVIDERS`` value.

    Raises:
        UnknownProviderError: naming the bad field.
    """
    if not raw or not raw.strip():
        return {}
    with _lock:
        if raw in _parsed:
            return _parsed[raw]
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise UnknownProviderError(f"{ENV_MODEL_PROVIDERS} is not JSON: {exc.msg}") from None
    if not isinstance(value, dict):
        raise UnknownProviderError(f"{ENV_MODEL_PROVIDERS} must be a JSON object of provider name -> settings")
    configs: dict[str, ProviderConfig] = {}
    for name, entry in value.items():
        if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9_-]{0,31}", name):
            raise UnknownProviderError(f"{ENV_MODEL_PROVIDERS}: bad provider name {name!r}")
        try:
            configs[name] = ProviderConfig.model_validate(entry)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"])
            raise UnknownProviderError(f"{ENV_MODEL_PROVIDERS}.{name}{'.' + field if field else ''}: {first['msg']}") from None
        if name not in BUILT_IN and not configs[name].factory:
            raise UnknownProviderError(f"{ENV_MODEL_PROVIDERS}.{name}.factory: a provider that is not built in needs 'module:callable'")
    with _lock:
        _parsed[raw] = configs
    return configs


def build_provider(
    choice: Mapping[str, Any] | None,
    agent_model: ModelSettings | None,
    default_model_id: str,
    environ: Mapping[str, str] | None = None,
) -> ModelProvider:
    """The provider for one model call: the run's choice over the agent's settings (``settings.resolve``).

    Raises:
        UnknownProviderError: the provider is not registered, lacks a model id, or its factory fails to load.
    """
    env = environment.environ() if environ is None else environ
    configs = parse_providers(env.get(ENV_MODEL_PROVIDERS))
    model = resolve(dict(choice or {}), agent_model, default_model_id)
    if model.provider == "scripted":
        raise UnknownProviderError("model.provider: 'scripted' is served by the runtime from model.script_uri")
    if model.provider not in BUILT_IN and model.provider not in configs:
        known = ", ".join(sorted({*BUILT_IN, *configs}))
        raise UnknownProviderError(f"model.provider: unknown provider {model.provider!r}; registered: {known}")
    if not model.model_id:
        raise UnknownProviderError(f"model.model_id: required for provider {model.provider!r} (in the start input or on the agent)")
    config = configs.get(model.provider, ProviderConfig())
    spec = ProviderSpec(model.provider, model, config)
    factory = _load_factory(config.factory) if config.factory else _BUILT_IN_FACTORIES[model.provider]
    return factory(spec)


def _load_factory(reference: str) -> ProviderFactory:
    return import_callable(reference, "provider factory", UnknownProviderError)


def _bedrock(spec: ProviderSpec) -> ModelProvider:
    from longstep.models.bedrock import BedrockConverseProvider, bedrock_runtime_client

    return BedrockConverseProvider(
        spec.model.model_id or "", client=bedrock_runtime_client(), max_tokens=spec.model.max_tokens, temperature=spec.model.temperature
    )


def _anthropic(spec: ProviderSpec) -> ModelProvider:
    from longstep.models.anthropic import DEFAULT_BASE_URL, AnthropicMessagesProvider

    return AnthropicMessagesProvider(
        spec.model.model_id or "",
        spec.api_key,
        max_tokens=spec.model.max_tokens,
        temperature=spec.model.temperature,
        base_url=spec.config.base_url or DEFAULT_BASE_URL,
        transport=spec.transport(),
    )


def _openai(spec: ProviderSpec) -> ModelProvider:
    from longstep.models.openai_compat import DEFAULT_BASE_URL, OpenAIChatProvider

    return OpenAIChatProvider(
        spec.model.model_id or "",
        spec.api_key if spec.config.secret_id else None,
        max_tokens=spec.model.max_tokens,
        temperature=spec.model.temperature,
        base_url=spec.config.base_url or DEFAULT_BASE_URL,
        max_tokens_field=str(spec.config.options.get("max_tokens_field", "max_completion_tokens")),
        transport=spec.transport(),
    )


_BUILT_IN_FACTORIES: dict[str, ProviderFactory] = {"bedrock": _bedrock, "anthropic": _anthropic, "openai": _openai}
