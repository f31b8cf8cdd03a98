"""The Bedrock Converse provider (``bedrock-runtime`` ``converse``)."""

from __future__ import annotations

from typing import Any

from longstep.classify import classify_client_error
from longstep.errors import ServiceUnavailableError
from longstep.messages import Message, text_of, user_text
from longstep.models.base import SUMMARY_SYSTEM_PROMPT, ModelReply, summary_request


class BedrockConverseProvider:
    """Calls Amazon Bedrock's Converse API with the agent's tools as ``toolSpec`` entries.

    Args:
        model_id: the Bedrock model id or inference profile.
        client: a boto3 ``bedrock-runtime`` client; created on first use when omitted.
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
            import boto3

            self._client = boto3.client("bedrock-runtime")
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
        return ModelReply(
            message=resp["output"]["message"],
            stop_reason=resp.get("stopReason", "end_turn"),
            usage={k: int(usage[k]) for k in ("inputTokens", "outputTokens", "totalTokens") if k in usage},
        )
