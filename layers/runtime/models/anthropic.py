"""The Anthropic Messages API provider (``POST {base_url}/v1/messages``).

The loop speaks Converse; this module translates both ways. Request and response formats:
https://platform.claude.com/docs/en/api/messages/create (``content`` blocks ``text`` and
``tool_use``; ``tool_result`` blocks in user turns; ``tools`` with ``input_schema``; the
``x-api-key`` and ``anthropic-version`` headers); stop reasons:
https://platform.claude.com/docs/en/build-with-claude/handling-stop-reasons.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from longstep.messages import Message, text_of, user_text
from longstep.models import stop_reasons as stops
from longstep.models.base import SUMMARY_SYSTEM_PROMPT, ModelReply, summary_request
from longstep.models.http import HttpRequest, Transport, classify_status, urllib_transport

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"

# Anthropic's stop_reason -> the Converse name (``stop_reasons``); refusal and
# model_context_window_exceeded keep their meaning under the same or a shared name.
STOP_REASONS = {
    "end_turn": stops.END_TURN,
    "tool_use": stops.TOOL_USE,
    "max_tokens": stops.MAX_TOKENS,
    "stop_sequence": stops.STOP_SEQUENCE,
    "refusal": stops.REFUSAL,
    "model_context_window_exceeded": stops.CONTEXT_WINDOW_EXCEEDED,
}


class AnthropicMessagesProvider:
    """Calls the Anthropic Messages API.

    Args:
        model_id: the Anthropic model id (``claude-...``).
        api_key: returns the API key (read lazily, e.g. ``secrets.api_key`` of a secret id).
        max_tokens: the reply's token cap (required by the API).
        temperature: sampling temperature (0-1 for this API).
        base_url: the API's base URL (a proxy or gateway may stand in).
        transport: sends the HTTP request (tests replay recorded responses).
    """

    name = "anthropic"

    def __init__(
        self,
        model_id: str,
        api_key: Callable[[], str],
        *,
        max_tokens: int = 4096,
        temperature: float = 0.0,
        base_url: str = DEFAULT_BASE_URL,
        transport: Transport = urllib_transport,
    ) -> None:
        self.model_id = model_id
        self.api_key = api_key
        self.max_tokens = max_tokens
        self.temperature = min(temperature, 1.0)  # the Messages API accepts 0-1
        self.base_url = base_url.rstrip("/")
        self.transport = transport

    def request(self, *, system: str, messages: list[Message], tools: list[dict[str, Any]]) -> dict[str, Any]:
        """The JSON body of the call (exposed for tests and debugging)."""
        body: dict[str, Any] = {
            "model": self.model_id,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "messages": [_message_to_anthropic(m) for m in messages],
        }
        if system:
            body["system"] = system
        if tools:
            body["tools"] = [_tool_to_anthropic(t) for t in tools]
        return body

    def converse(self, *, system: str, messages: list[Message], tools: list[dict[str, Any]], turn: int) -> ModelReply:
        headers = {"x-api-key": self.api_key(), "anthropic-version": API_VERSION}
        response = self.transport(HttpRequest(f"{self.base_url}/v1/messages", headers, self.request(system=system, messages=messages, tools=tools)))
        error = classify_status(response, self.name)
        if error is not None:
            raise error
        return reply_from_anthropic(response.json())

    def summarize(self, *, previous: str | None, outline: str, turn: int) -> str:
        """Ask the model for a summary of older turns (a call with no tools)."""
        reply = self.converse(system=SUMMARY_SYSTEM_PROMPT, messages=[user_text(summary_request(previous, outline))], tools=[], turn=turn)
        return text_of(reply.message)


def reply_from_anthropic(data: dict[str, Any]) -> ModelReply:
    """A Messages API response as a Converse-format :class:`ModelReply`."""
    content: list[dict[str, Any]] = []
    for block in data.get("content") or []:
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            content.append({"text": block["text"]})
        elif kind == "tool_use":
            content.append({"toolUse": {"toolUseId": block["id"], "name": block["name"], "input": block.get("input") or {}}})
        # thinking and server-tool blocks are not part of the loop's transcript
    raw = data.get("stop_reason") or "end_turn"
    usage = data.get("usage") or {}
    counts = {"inputTokens": int(usage.get("input_tokens", 0)), "outputTokens": int(usage.get("output_tokens", 0))}
    counts["totalTokens"] = counts["inputTokens"] + counts["outputTokens"]
    return ModelReply(
        message={"role": "assistant", "content": content},
        stop_reason=STOP_REASONS.get(raw, raw),
        usage=counts,
        provider_stop=raw,
    )


def _message_to_anthropic(message: Message) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    for block in message.get("content", []):
        if "text" in block:
            blocks.append({"type": "text", "text": block["text"]})
        elif "toolUse" in block:
            use = block["toolUse"]
            blocks.append({"type": "tool_use", "id": use["toolUseId"], "name": use["name"], "input": use["input"]})
        elif "toolResult" in block:
            result = block["toolResult"]
            blocks.append(
                {
                    "type": "tool_result",
                    "tool_use_id": result["toolUseId"],
                    "content": [{"type": "text", "text": _result_text(result["content"])}],
                    "is_error": result.get("status") == "error",
                }
            )
    return {"role": message["role"], "content": blocks}


def _result_text(parts: list[dict[str, Any]]) -> str:
    """A Converse tool result's content as text (JSON parts are serialized canonically)."""
    return "\n".join(p["text"] if "text" in p else json.dumps(p.get("json"), sort_keys=True) for p in parts)


def _tool_to_anthropic(tool: dict[str, Any]) -> dict[str, Any]:
    spec = tool["toolSpec"]
    return {"name": spec["name"], "description": spec.get("description", ""), "input_schema": spec["inputSchema"]["json"]}
