"""Messages in the Bedrock Converse format, and the canonical hash of a transcript."""

from __future__ import annotations

import hashlib
import json
from typing import Any

Message = dict[str, Any]


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no spaces: the same value always gives the same bytes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def transcript_sha256(messages: list[Message]) -> str:
    """The sha256 of the canonical JSON of a message history."""
    return hashlib.sha256(canonical_json(messages).encode("utf-8")).hexdigest()


def user_text(text: str) -> Message:
    """A user message holding one text block."""
    return {"role": "user", "content": [{"text": text}]}


def tool_uses(message: Message) -> list[dict[str, Any]]:
    """The ``toolUse`` blocks of an assistant message, in order."""
    return [block["toolUse"] for block in message.get("content", []) if "toolUse" in block]


def text_of(message: Message) -> str:
    """The concatenated text blocks of a message."""
    return "\n".join(block["text"] for block in message.get("content", []) if "text" in block)


def tool_result_block(tool_use_id: str, result: Any, *, is_error: bool = False) -> dict[str, Any]:
    """A ``toolResult`` content block carrying ``result`` as JSON."""
    payload = result if isinstance(result, dict) else {"value": result}
    return {
        "toolResult": {
            "toolUseId": tool_use_id,
            "content": [{"json": payload}],
            "status": "error" if is_error else "success",
        }
    }
