"""An OpenAI-compatible Chat Completions provider (``POST {base_url}/chat/completions``).

Works with OpenAI and with servers that implement the same API (base URL configurable). Formats:
https://platform.openai.com/docs/api-reference/chat/create (request: ``messages`` with ``system``,
``user``, ``assistant`` + ``tool_calls``, ``tool`` + ``tool_call_id``; ``tools`` of type
``function``) and https://platform.openai.com/docs/api-reference/chat/object (response:
``choices[0].message``, ``finish_reason`` stop | length | tool_calls | content_filter |
function_call, ``message.refusal``, ``usage``).
"""

from __future__ import annotations

import json
from typing import Any, Callable

from longstep.messages import Message, text_of, user_text
from longstep.models import stop_reasons as stops
from longstep.models.base import SUMMARY_SYSTEM_PROMPT, ModelReply, summary_request
from longstep.models.http import HttpRequest, Transport, classify_status, urllib_transport

DEFAULT_BASE_URL = "https://api.openai.com/v1"

FINISH_REASONS = {
    "stop": stops.END_TURN,
    "tool_calls": stops.TOOL_USE,
    "function_call": stops.TOOL_USE,
    "length": stops.MAX_TOKENS,
    "content_filter": stops.CONTENT_FILTERED,
}


class OpenAIChatProvider:
    """Calls an OpenAI-compatible Chat Completions endpoint.

    Args:
        model_id: the endpoint's model name.
        api_key: returns the bearer token, or None for an endpoint without authentication.
        max_tokens: the reply's token cap.
        temperature: sampling temperature.
        base_url: the API base (``https://api.openai.com/v1`` or a compatible server's).
        max_tokens_field: ``max_completion_tokens`` (OpenAI's current name) or ``max_tokens``
            (what older compatible servers accept).
        transport: sends the HTTP request (tests replay recorded responses).
    """

    name = "openai"

    def __init__(
        self,
        model_id: str,
        api_key: Callable[[], str] | None,
        *,
        max_tokens: int = 4096,
        temperature: float = 0.0,
        base_url: str = DEFAULT_BASE_URL,
        max_tokens_field: str = "max_completion_tokens",
        transport: Transport = urllib_transport,
    ) -> None:
        self.model_id = model_id
        self.api_key = api_key
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.base_url = base_url.rstrip("/")
        self.max_tokens_field = max_tokens_field
        self.transport = transport

    def request(self, *, system: str, messages: list[Message], tools: list[dict[str, Any]]) -> dict[str, Any]:
        """The JSON body of the call (exposed for tests and debugging)."""
        chat: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        for message in messages:
            chat.extend(_message_to_openai(message))
        body: dict[str, Any] = {"model": self.model_id, "messages": chat, "temperature": self.temperature, self.max_tokens_field: self.max_tokens}
        if tools:
            body["tools"] = [_tool_to_openai(t) for t in tools]
        return body

    def converse(self, *, system: str, messages: list[Message], tools: list[dict[str, Any]], turn: int) -> ModelReply:
        headers = {"authorization": f"Bearer {self.api_key()}"} if self.api_key else {}
        response = self.transport(
            HttpRequest(f"{self.base_url}/chat/completions", headers, self.request(system=system, messages=messages, tools=tools))
        )
        error = classify_status(response, self.name)
        if error is not None:
            raise error
        return reply_from_openai(response.json())

    def summarize(self, *, previous: str | None, outline: str, turn: int) -> str:
        """Ask the model for a summary of older turns (a call with no tools)."""
        reply = self.converse(system=SUMMARY_SYSTEM_PROMPT, messages=[user_text(summary_request(previous, outline))], tools=[], turn=turn)
        return text_of(reply.message)


def reply_from_openai(data: dict[str, Any]) -> ModelReply:
    """A Chat Completions response as a Converse-format :class:`ModelReply`.

    A refusal (``message.refusal``) is the ``refusal`` stop reason; a tool call whose arguments are
    not a JSON object is dropped and the reply becomes ``malformed_tool_use``.
    """
    choices = data.get("choices") or []
    choice = choices[0] if choices else {}
    message = choice.get("message") or {}
    raw = choice.get("finish_reason") or "stop"
    stop = FINISH_REASONS.get(raw, raw)
    content: list[dict[str, Any]] = []
    if message.get("content"):
        content.append({"text": message["content"]})
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except json.JSONDecodeError:
            arguments = None
        if not isinstance(arguments, dict):
            stop = stops.MALFORMED_TOOL_USE
            continue
        content.append({"toolUse": {"toolUseId": call["id"], "name": function.get("name", ""), "input": arguments}})
    if message.get("refusal"):
        content.append({"text": message["refusal"]})
        stop = stops.REFUSAL
    usage = data.get("usage") or {}
    counts = {
        "inputTokens": int(usage.get("prompt_tokens", 0)),
        "outputTokens": int(usage.get("completion_tokens", 0)),
        "totalTokens": int(usage.get("total_tokens", 0)),
    }
    return ModelReply(message={"role": "assistant", "content": content}, stop_reason=stop, usage=counts, provider_stop=raw)


def _message_to_openai(message: Message) -> list[dict[str, Any]]:
    """One Converse message as Chat Completions messages (tool results become ``tool`` messages)."""
    blocks = message.get("content", [])
    text = "\n".join(b["text"] for b in blocks if "text" in b)
    if message["role"] == "assistant":
        out: dict[str, Any] = {"role": "assistant", "content": text or None}
        calls = [
            {
                "id": b["toolUse"]["toolUseId"],
                "type": "function",
                "function": {"name": b["toolUse"]["name"], "arguments": json.dumps(b["toolUse"]["input"], sort_keys=True)},
            }
            for b in blocks
            if "toolUse" in b
        ]
        if calls:
            out["tool_calls"] = calls
        return [out]
    out_messages = [
        {"role": "tool", "tool_call_id": b["toolResult"]["toolUseId"], "content": _result_text(b["toolResult"])} for b in blocks if "toolResult" in b
    ]
    if text:
        out_messages.append({"role": "user", "content": text})
    return out_messages


def _result_text(result: dict[str, Any]) -> str:
    text = "\n".join(p["text"] if "text" in p else json.dumps(p.get("json"), sort_keys=True) for p in result["content"])
    return f"ERROR: {text}" if result.get("status") == "error" else text


def _tool_to_openai(tool: dict[str, Any]) -> dict[str, Any]:
    spec = tool["toolSpec"]
    return {
        "type": "function",
        "function": {"name": spec["name"], "description": spec.get("description", ""), "parameters": spec["inputSchema"]["json"]},
    }
