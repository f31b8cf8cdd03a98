"""Which model answers, and how: the per-agent settings and the start input's override.

Resolution, field by field: the start input's ``model`` (fields it sets), then the agent's
``Agent.model``, then the defaults (provider ``bedrock``, the stack's model id, temperature 0,
4096 tokens). A start input naming another provider than the agent's does not inherit the
agent's model id (a Claude id means nothing to an OpenAI-compatible endpoint).
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_PROVIDER = "bedrock"
DEFAULT_TEMPERATURE = 0.0
DEFAULT_MAX_TOKENS = 4096
# Provider names are keys of LONGSTEP_MODEL_PROVIDERS and of the built-in registry.
PROVIDER_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")


class ModelSettings(BaseModel):
    """An agent's model settings; every field may be left to the next level (see the module doc).

    Attributes:
        provider: a registered provider name (``bedrock``, ``anthropic``, ``openai``, ``scripted``,
            or one added by configuration).
        model_id: the provider's model id (Bedrock: a model id or inference profile id).
        temperature: sampling temperature (0-2; Anthropic accepts 0-1).
        max_tokens: the reply's token cap.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: str | None = Field(default=None, pattern=PROVIDER_NAME.pattern)
    model_id: str | None = Field(default=None, min_length=1, max_length=256)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    max_tokens: int | None = Field(default=None, ge=1, le=200_000)


class ResolvedModel(BaseModel):
    """The settings one model call uses, every field decided."""

    model_config = ConfigDict(frozen=True)

    provider: str
    model_id: str | None
    temperature: float
    max_tokens: int


def resolve(choice: dict | None, agent: ModelSettings | None, default_model_id: str) -> ResolvedModel:
    """Merge the start input's ``model`` over the agent's settings over the defaults.

    Args:
        choice: the run's recorded ``model`` (the start input's), or None.
        agent: the agent's ``Agent.model``, or None.
        default_model_id: the stack's default model id (a Bedrock id: used for ``bedrock`` only).
    """
    choice = choice or {}
    agent = agent or ModelSettings()
    provider = choice.get("provider") or agent.provider or DEFAULT_PROVIDER
    same_provider = provider == (agent.provider or DEFAULT_PROVIDER)
    model_id = choice.get("model_id") or (agent.model_id if same_provider else None)
    if model_id is None and provider == DEFAULT_PROVIDER:
        model_id = default_model_id
    return ResolvedModel(
        provider=provider,
        model_id=model_id,
        temperature=_first(choice.get("temperature"), agent.temperature, DEFAULT_TEMPERATURE),
        max_tokens=_first(choice.get("max_tokens"), agent.max_tokens, DEFAULT_MAX_TOKENS),
    )


def _first(*values):
    """The first value that is not None (0 and 0.0 are real settings)."""
    return next(v for v in values if v is not None)
