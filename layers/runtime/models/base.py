"""The model provider interface."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from longstep.messages import Message


@dataclass(frozen=True)
class ModelReply:
    """One model answer.

    Attributes:
        message: the assistant message in Converse format (text and toolUse blocks).
        stop_reason: normalized to the Converse names (``end_turn``, ``tool_use``, ``max_tokens``,
            ``content_filtered``...; see ``longstep.models.stop_reasons``).
        usage: token counts as the provider reports them (``inputTokens``, ``outputTokens``...).
        provider_stop: the provider's own value when it differs (``length``, ``refusal``...).
    """

    message: Message
    stop_reason: str
    usage: dict[str, int] = field(default_factory=dict)
    provider_stop: str | None = None

    def to_record(self) -> dict[str, Any]:
        """The JSON form recorded in the checkpoint log."""
        record = {"message": self.message, "stop_reason": self.stop_reason, "usage": self.usage}
        if self.provider_stop is not None and self.provider_stop != self.stop_reason:
            record["provider_stop"] = self.provider_stop
        return record

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> "ModelReply":
        """Rebuild a reply from its recorded JSON form."""
        return cls(
            message=record["message"],
            stop_reason=record["stop_reason"],
            usage=record.get("usage", {}),
            provider_stop=record.get("provider_stop"),
        )


class ModelProvider(Protocol):
    """Answers a conversation. ``turn`` lets deterministic providers key their replies."""

    def converse(self, *, system: str, messages: list[Message], tools: list[dict[str, Any]], turn: int) -> ModelReply: ...

    def summarize(self, *, previous: str | None, outline: str, turn: int) -> str:
        """Compress ``previous`` (an earlier summary) and ``outline`` (older turns) into a summary."""
        ...


SUMMARY_SYSTEM_PROMPT = (
    "You compress an agent's working history. Keep every fact the agent still needs: decisions, ids, "
    "file names, open problems, and what each tool returned that matters. Drop chatter. Answer with the summary only."
)


def summary_request(previous: str | None, outline: str) -> str:
    """The user message a model-based summarizer is given."""
    earlier = f"Summary so far:\n{previous}\n\n" if previous else ""
    return f"{earlier}Turns to add:\n{outline}\n\nWrite the new summary."
