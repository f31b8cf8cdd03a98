"""Stop reasons: only a finished reply is a final answer; the rest is corrected or escalated."""

from __future__ import annotations

import pytest

from longstep import policy
from longstep.tasks import model_turn
from longstep.agent import Agent
from longstep.errors import CorrectionBudgetError
from longstep.models.base import ModelReply
from longstep.models.stop_reasons import CORRECTIONS, ModelStoppedError, classify_stop, judge_stop
from longstep.policy import Verdict
from longstep.tools.registry import ToolRegistry

TEXT = {"role": "assistant", "content": [{"text": "Summary: partial"}]}
CALL = {"role": "assistant", "content": [{"text": "filing"}, {"toolUse": {"toolUseId": "t1", "name": "file_ticket", "input": {}}}]}


def record(stop, message=TEXT):
    return ModelReply(message=message, stop_reason=stop).to_record()


@pytest.mark.parametrize("stop, message", [("end_turn", TEXT), ("stop_sequence", TEXT), ("tool_use", CALL), ("max_tokens", CALL)])
def test_finished_replies_and_tool_calls_go_on(stop, message):
    assert classify_stop(stop, message).ok
    assert judge_stop(record(stop, message)) is None


@pytest.mark.parametrize(
    "stop", ["max_tokens", "content_filtered", "guardrail_intervened", "refusal", "malformed_tool_use", "malformed_model_output"]
)
def test_each_correctable_stop_is_fed_back_and_never_final(stop):
    judged = judge_stop(record(stop))
    assert judged["correction"] == CORRECTIONS[stop]
    assert judged["message"]["content"] == TEXT["content"]  # the text stays in the transcript
    assert policy.correction_kind(judged, []) == "model"  # counted in Agent.max_model_corrections


@pytest.mark.parametrize("stop", ["content_filtered", "guardrail_intervened", "refusal", "malformed_tool_use"])
def test_tool_calls_of_a_blocked_reply_are_dropped(stop):
    judged = judge_stop(record(stop, CALL))
    assert judged["message"]["content"] == [{"text": "filing"}]


def test_an_unknown_stop_reason_is_corrected_naming_it():
    assert "pause_turn" in judge_stop(record("pause_turn"))["correction"]


def test_context_window_exceeded_escalates_at_once():
    with pytest.raises(ModelStoppedError, match="model_context_window_exceeded"):
        judge_stop(record("model_context_window_exceeded"))


def test_the_loop_does_not_give_a_cut_off_answer_to_the_verifier():
    seen = []

    def verifier(answer, messages):
        seen.append(answer)
        return Verdict(ok=True)

    agent = Agent(name="a", system_prompt="s", tools=ToolRegistry(), verifier=verifier)
    judged = model_turn._judge(agent, record("max_tokens"), [], "run-1", 3)
    assert seen == [] and "verdict" not in judged
    assert judged["correction"] == CORRECTIONS["max_tokens"]
    assert model_turn._judge(agent, record("end_turn"), [], "run-1", 4)["verdict"] == {"ok": True, "feedback": ""}
    assert seen == ["Summary: partial"]


def test_repeated_stops_exhaust_the_correction_budget():
    kinds = [policy.correction_kind(judge_stop(record("content_filtered")), []) for _ in range(3)]
    with pytest.raises(CorrectionBudgetError):
        policy.check_budgets(kinds, model_budget=3, semantic_budget=2)


def test_provider_stop_is_recorded_only_when_it_differs():
    assert "provider_stop" not in ModelReply(message=TEXT, stop_reason="end_turn", provider_stop="end_turn").to_record()
    rec = ModelReply(message=TEXT, stop_reason="max_tokens", provider_stop="length").to_record()
    assert ModelReply.from_record(rec).provider_stop == "length"
