"""The Bedrock Converse provider (``bedrock-runtime`` ``converse``)."""

from __future__ import annotations

from typing import Any

from longstep import clients
from longstep.classify import classify_client_error
from longstep.errors import ServiceUnavailableError
from longstep.messages import Message, text_of, user_text
from longstep.models.base import SUMMARY_SYSTEM_PROMPT, ModelReply, summary_request


# A Converse call is billed when the model answers, also when the client stopped waiting: with
# botocore's defaults (60 s read timeout, legacy retry mode with 5 attempts, which retries
# ReadTimeoutError) a reply slower than a minute is paid up to 5 times in one invocation.
# So: a read timeout above the longest reply we expect (AWS suggests starting from a large value
# such as 3,600 s; the ModelTurn function's own timeout, at most 900 s, ends the call first), and
# standard retry mode with 2 attempts (one SDK retry for a dropped connection or throttle; Step
# Functions' Retry with backoff does the rest and counts attempts).
# https://repost.aws/knowledge-center/bedrock-large-model-read-timeouts
# https://docs.aws.amazon.com/boto3/latest/guide/retries.html
# https://boto3.amazonaws.com/v1/documentation/api/latest/reference/core/config.html (Config)
BEDROCK_READ_TIMEOUT_SECONDS = 3600
BEDROCK_CONNECT_TIMEOUT_SECONDS = 10
BEDROCK_MAX_ATTEMPTS = 2


def bedrock_client_config() -> Any:
    """The botocore ``Config`` of the ``bedrock-runtime`` client (see the comment above)."""
    from botocore.config import Config

    return Config(
        read_timeout=BEDROCK_READ_TIMEOUT_SECONDS,
        connect_timeout=BEDROCK_CONNECT_TIMEOUT_SECONDS,
        retries={"mode": "standard", "total_max_attempts": BEDROCK_MAX_ATTEMPTS},  # initial call included
    )


def bedrock_runtime_client() -> Any:
    """The process's ``bedrock-runtime`` client, built with :func:`bedrock_client_config`."""
    return clients.client("bedrock-runtime", config=bedrock_client_config())


class BedrockConverseProvider:
    """Calls Amazon Bedrock's Converse API with the agent's tools as ``toolSpec`` entries.

    Args:
        model_id: the Bedrock model id or inference profile.
        client: a boto3 ``bedrock-runtime`` client; the shared one (:func:`bedrock_runtime_client`)
            when omitted, fetched on first use.
        max_tokens: the reply's token cap.
        temperature: sampling temperature.
    """

    def __init__(self, model_id: str, client: Any = None, max_tokens: int = 4096, temperature: float = 0.0) -> None:
        self.model_id = model_id
        self._client = client
        self.max_tokens = max_tokens
        self.temperature = temperature

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = bedrock_runtime_client()
        return self._client

    def request(self, *, system: str, messages: list[Message], tools: list[dict[str, Any]]) -> dict[str, Any]:
        """The keyword arguments of the ``converse`` call (exposed for tests and debugging)."""
        kwargs: dict[str, Any] = {
            "modelId": self.model_id,
            "messages": messages,
            "inferenceConfig": {"maxTokens": self.max_tokens, "temperature": self.temperature},
        }
        if system:
            kwargs["system"] = [{"text": system}]
        if tools:
            kwargs["toolConfig"] = {"tools": tools}
        return kwargs

    def summarize(self, *, previous: str | None, outline: str, turn: int) -> str:
        """Ask the model for a summary of older turns (a plain Converse call with no tools)."""
        reply = self.converse(system=SUMMARY_SYSTEM_PROMPT, messages=[user_text(summary_request(previous, outline))], tools=[], turn=turn)
        return text_of(reply.message)

    def converse(self, *, system: str, messages: list[Message], tools: list[dict[str, Any]], turn: int) -> ModelReply:
        from botocore.exceptions import ClientError, ConnectionError, HTTPClientError

        try:
            resp = self.client.converse(**self.request(system=system, messages=messages, tools=tools))
        except ClientError as exc:
            raise classify_client_error(exc, model=True) from exc
        except (ConnectionError, HTTPClientError) as exc:  # read/connect timeouts, dropped connections
            raise ServiceUnavailableError(f"{type(exc).__name__}: {exc}") from exc
        usage = resp.get("usage", {})
        # Converse's stopReason values are the normalized names (longstep.models.stop_reasons).
        return ModelReply(
            message=resp["output"]["message"],
            stop_reason=resp.get("stopReason", "end_turn"),
            usage={k: int(usage[k]) for k in ("inputTokens", "outputTokens", "totalTokens") if k in usage},
        )
