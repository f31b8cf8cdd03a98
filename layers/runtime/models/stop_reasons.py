"""Why the model stopped, normalized across providers, and what the loop does about it.

Every provider maps its own value onto the Bedrock Converse names below (``ModelReply.stop_reason``)
and keeps the original in ``ModelReply.provider_stop``. Only ``end_turn`` and ``stop_sequence``
without a tool call can be a final answer; ``tool_use`` runs the tools. Everything else is either
fed back to the model as a correction (counted in ``Agent.max_model_corrections``, so a model that
keeps hitting it escalates) or escalated at once when another try cannot help.

Sources:
- Bedrock Converse ``stopReason``: https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html
  (end_turn | tool_use | max_tokens | stop_sequence | guardrail_intervened | content_filtered |
  malformed_model_output | malformed_tool_use | model_context_window_exceeded, as in botocore's model)
- Anthropic Messages ``stop_reason``: https://platform.claude.com/docs/en/build-with-claude/handling-stop-reasons
  (end_turn, max_tokens, stop_sequence, tool_use, pause_turn, refusal, model_context_window_exceeded)
- OpenAI Chat Completions ``finish_reason``: https://platform.openai.com/docs/api-reference/chat/object
  (stop, length, tool_calls, content_filter, function_call; ``message.refusal`` for refusals)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from longstep.errors import ModelStoppedError, PermanentError  # noqa: F401 - re-exported
from longstep.messages import tool_uses

END_TURN = "end_turn"
TOOL_USE = "tool_use"
STOP_SEQUENCE = "stop_sequence"
MAX_TOKENS = "max_tokens"
CONTENT_FILTERED = "content_filtered"
GUARDRAIL_INTERVENED = "guardrail_intervened"
REFUSAL = "refusal"
MALFORMED_TOOL_USE = "malformed_tool_use"
MALFORMED_MODEL_OUTPUT = "malformed_model_output"
CONTEXT_WINDOW_EXCEEDED = "model_context_window_exceeded"

# Stop reasons a final answer may end with.
FINAL = frozenset({END_TURN, STOP_SEQUENCE})

# Fed back to the model: it can do better on the next turn (shorter, rephrased, well-formed).
CORRECTIONS: dict[str, str] = {
    MAX_TOKENS: (
        "Your reply was cut off at the output token limit before it was complete, so it was not taken as "
        "your answer. Give a shorter answer, or do the work in smaller steps with the tools."
    ),
    CONTENT_FILTERED: (
        "Your reply was withheld by a content filter and was not delivered. Answer again without the "
        "filtered content, or explain briefly why the task cannot be done."
    ),
    GUARDRAIL_INTERVENED: (
        "A guardrail blocked your reply and it was not delivered. Answer again within the guardrail's "
        "policy, or explain briefly why the task cannot be done."
    ),
    REFUSAL: (
        "Your reply was stopped as a refusal and was not taken as an answer. If part of the task is "
        "acceptable, do that part; otherwise say briefly what cannot be done and why."
    ),
    MALFORMED_TOOL_USE: (
        "Your tool call was malformed (its arguments were not valid JSON for the tool) and was not run. "
        "Call the tool again with arguments that match its input schema."
    ),
    MALFORMED_MODEL_OUTPUT: "Your reply could not be parsed and was not delivered. Answer again.",
}
UNKNOWN_CORRECTION = "Your reply stopped for an unexpected reason ({reason}) and was not taken as an answer. Answer again."

# Escalated at once: the same request cannot succeed (the context itself is too large).
ESCALATIONS: dict[str, str] = {
    CONTEXT_WINDOW_EXCEEDED: "the conversation no longer fits the model's context window",
}


@dataclass(frozen=True)
class StopVerdict:
    """What a reply's stop reason means for the loop.

    Attributes:
        ok: the reply may be used as it is (a final answer for the verifier, or tool calls).
        feedback: the correction fed back to the model when not ok.
        escalate: true when the step must go to a human at once (no correction can help).
    """

    ok: bool
    feedback: str = ""
    escalate: bool = False


def classify_stop(stop_reason: str, message: dict[str, Any]) -> StopVerdict:
    """Classify a reply by its normalized stop reason.

    Args:
        stop_reason: the normalized stop reason (``ModelReply.stop_reason``).
        message: the assistant message (a ``max_tokens`` reply with a tool call goes on: the call's
            arguments are validated against the tool's schema like any other).
    """
    if stop_reason in FINAL or stop_reason == TOOL_USE:
        return StopVerdict(ok=True)
    if stop_reason == MAX_TOKENS and tool_uses(message):
        return StopVerdict(ok=True)
    if stop_reason in ESCALATIONS:
        return StopVerdict(ok=False, feedback=ESCALATIONS[stop_reason], escalate=True)
    return StopVerdict(ok=False, feedback=CORRECTIONS.get(stop_reason, UNKNOWN_CORRECTION.format(reason=stop_reason)))


def judge_stop(record: dict[str, Any]) -> dict[str, Any] | None:
    """The recorded reply to keep when its stop reason forbids using it as is, else None.

    A reply that needs correcting keeps its text but loses its tool calls (they are truncated,
    filtered or malformed, and must not run), and carries the correction fed back to the model.

    Raises:
        ModelStoppedError: the stop reason needs a human (see ``ESCALATIONS``).
    """
    verdict = classify_stop(record.get("stop_reason", END_TURN), record["message"])
    if verdict.ok:
        return None
    if verdict.escalate:
        raise ModelStoppedError(f"the model stopped with {record.get('stop_reason')}: {verdict.feedback}")
    message = record["message"]
    kept = [block for block in message.get("content", []) if "toolUse" not in block]
    return {**record, "message": {**message, "content": kept}, "correction": verdict.feedback}
