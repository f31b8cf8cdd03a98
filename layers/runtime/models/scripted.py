"""A scripted model: replies are read from a script keyed by turn index.

A retried or resumed model call for turn N gets the same reply, so local runs and tests are
deterministic, and the provider can be loaded from a script file in S3 by a real Lambda.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from longstep.errors import InvalidInputError, ScriptExhaustedError
from longstep.errors import describe_validation_error
from longstep.messages import Message
from longstep.models.base import ModelReply


SUMMARY_KEEP_CHARS = 4_000
# The scripted text streams in pieces of about this many characters (at word boundaries), as a
# provider's streaming API hands out deltas: what a follower of the run's events sees.
STREAM_CHUNK_CHARS = 24


def text_chunks(text: str, size: int = STREAM_CHUNK_CHARS) -> list[str]:
    """``text`` in pieces of about ``size`` characters, cut after spaces; joined, they are ``text``."""
    chunks, start = [], 0
    while start < len(text):
        cut = text.find(" ", start + size)
        end = len(text) if cut < 0 else cut + 1
        chunks.append(text[start:end])
        start = end
    return chunks


class ScriptedToolCall(BaseModel):
    """A tool call the scripted model makes."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    input: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None


class ScriptedTurn(BaseModel):
    """The scripted reply of one turn: text and/or tool calls."""

    model_config = ConfigDict(extra="forbid")

    text: str | None = None
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)
    input_tokens: int = Field(default=100, ge=0)
    output_tokens: int = Field(default=50, ge=0)


class Script(BaseModel):
    """Scripted replies keyed by turn index (as strings in JSON)."""

    model_config = ConfigDict(extra="forbid")

    turns: dict[int, ScriptedTurn]
    children: dict[str, "Script"] = Field(
        default_factory=dict, description="the scripts of the subagent runs this run starts, by the tool-use id of the delegating call"
    )


def parse_script(data: Any) -> Script:
    """Validate a script document.

    Raises:
        InvalidInputError: naming the bad field.
    """
    try:
        return Script.model_validate(data)
    except ValidationError as exc:
        raise InvalidInputError(f"invalid model script: {describe_validation_error(exc)}") from None


class ScriptedProvider:
    """A model provider that plays back a script.

    Args:
        script: the validated script.
    """

    # ``converse`` takes ``on_text`` and hands it the reply's text in pieces (``longstep.events``).
    streams_text = True

    def __init__(self, script: Script) -> None:
        self.script = script
        self.calls = 0
        self.summaries = 0

    @classmethod
    def from_json(cls, text: str) -> "ScriptedProvider":
        """Build a provider from the JSON text of a script."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"model script is not JSON: {exc}") from None
        return cls(parse_script(data))

    def child(self, path: str) -> "ScriptedProvider":
        """The provider of a subagent's script: ``path`` is tool-use ids separated by ``/``.

        Raises:
            InvalidInputError: the script has no such child.
        """
        script = self.script
        for use_id in path.split("/"):
            if use_id not in script.children:
                raise InvalidInputError(f"model script: children: no script for the subagent call {use_id!r}")
            script = script.children[use_id]
        return ScriptedProvider(script)

    def summarize(self, *, previous: str | None, outline: str, turn: int) -> str:
        """A deterministic stand-in for a model's summary: the outline's lines, each cut short."""
        self.summaries += 1
        lines = [line[:120] for line in outline.splitlines()]
        text = " | ".join(([previous[-SUMMARY_KEEP_CHARS:]] if previous else []) + lines)
        return text[-SUMMARY_KEEP_CHARS:]

    def converse(
        self, *, system: str, messages: list[Message], tools: list[dict[str, Any]], turn: int, on_text: Callable[[str], None] | None = None
    ) -> ModelReply:
        self.calls += 1
        scripted = self.script.turns.get(turn)
        if scripted is None:
            raise ScriptExhaustedError(f"the model script has no reply for turn {turn}")
        content: list[dict[str, Any]] = []
        if scripted.text:
            content.append({"text": scripted.text})
            for chunk in text_chunks(scripted.text) if on_text else ():
                on_text(chunk)
        for index, call in enumerate(scripted.tool_calls):
            content.append({"toolUse": {"toolUseId": call.id or f"t{turn}c{index}", "name": call.name, "input": call.input}})
        return ModelReply(
            message={"role": "assistant", "content": content},
            stop_reason="tool_use" if scripted.tool_calls else "end_turn",
            usage={"inputTokens": scripted.input_tokens, "outputTokens": scripted.output_tokens},
        )
