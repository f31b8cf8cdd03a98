"""Model and semantic failures: corrective feedback to the model, within budgets.

A model error (an unknown tool, arguments failing the schema, an empty reply) is answered with
feedback the model can act on; so is a final answer the agent's verifier rejects. Each kind has
a budget of consecutive corrections; past it, the step escalates to a human instead of looping.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from longstep.errors import CorrectionBudgetError, VerifierBudgetError

MODEL_ERROR_KINDS = frozenset({"UnknownToolError", "ToolArgumentsError", "ToolInputError"})
EMPTY_REPLY = "Your reply was empty. Answer with text, or call one of the tools."
VERIFIER_PREFIX = "The answer was checked and rejected: "


@dataclass(frozen=True)
class Verdict:
    """A verifier's judgement of a final answer."""

    ok: bool
    feedback: str = ""


Verifier = Callable[[str, list[dict[str, Any]]], Verdict]
"""``verifier(answer, messages)``: judge the final answer (a Python check or a model-based judge)."""


def correction_kind(record: dict[str, Any], tool_results: list[dict[str, Any]]) -> str | None:
    """Why a recorded turn needed correcting: ``model``, ``semantic``, or None.

    Args:
        record: the turn's recorded model step.
        tool_results: the turn's recorded tool results, in call order.
    """
    if record.get("verdict") and not record["verdict"]["ok"]:
        return "semantic"
    if record.get("correction"):
        return "model"
    if any(r["status"] == "error" and r.get("content", {}).get("kind") in MODEL_ERROR_KINDS for r in tool_results):
        return "model"
    return None


def consecutive(kinds: list[str | None], kind: str) -> int:
    """How many of the last entries of ``kinds`` equal ``kind``, without a break."""
    count = 0
    for item in reversed(kinds):
        if item != kind:
            break
        count += 1
    return count


def check_budgets(kinds: list[str | None], model_budget: int, semantic_budget: int) -> None:
    """Raise when the turns so far end in more consecutive corrections than a budget allows."""
    model = consecutive(kinds, "model")
    if model >= model_budget:
        raise CorrectionBudgetError(f"the model needed {model} corrections in a row (budget {model_budget})")
    semantic = consecutive(kinds, "semantic")
    if semantic >= semantic_budget:
        raise VerifierBudgetError(f"the final answer failed verification {semantic} times in a row (budget {semantic_budget})")
