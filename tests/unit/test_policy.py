"""Correction budgets: which turns needed correcting, and when a budget is spent."""

import pytest

from longstep.errors import CorrectionBudgetError, PermanentError, VerifierBudgetError
from longstep.policy import check_budgets, consecutive, correction_kind

REPLY = {"message": {"role": "assistant", "content": [{"text": "hi"}]}, "stop_reason": "end_turn"}


def test_a_turn_with_an_unknown_tool_needs_a_model_correction():
    bad = {"status": "error", "content": {"error": "unknown tool", "kind": "UnknownToolError"}}
    assert correction_kind(REPLY, [bad]) == "model"


def test_a_rejected_call_is_not_a_model_mistake():
    rejected = {"status": "error", "content": {"error": "rejected by the approver", "rejected": True}}
    assert correction_kind(REPLY, [rejected]) is None


def test_empty_reply_and_failed_verdict_are_classified():
    assert correction_kind({**REPLY, "correction": "empty"}, []) == "model"
    assert correction_kind({**REPLY, "verdict": {"ok": False, "feedback": "no"}}, []) == "semantic"
    assert correction_kind({**REPLY, "verdict": {"ok": True, "feedback": ""}}, []) is None


def test_consecutive_counts_only_the_unbroken_tail():
    assert consecutive(["model", None, "model", "model"], "model") == 2
    assert consecutive(["model", "semantic"], "model") == 0
    assert consecutive([], "model") == 0


def test_budgets_raise_permanent_errors_when_spent():
    check_budgets(["model", "model"], model_budget=3, semantic_budget=2)
    with pytest.raises(CorrectionBudgetError, match="3 corrections in a row"):
        check_budgets(["model"] * 3, model_budget=3, semantic_budget=2)
    with pytest.raises(VerifierBudgetError, match="2 times"):
        check_budgets([None, "semantic", "semantic"], model_budget=3, semantic_budget=2)
    assert issubclass(CorrectionBudgetError, PermanentError) and issubclass(VerifierBudgetError, PermanentError)
