"""The triage sample's final answer: its prompt, its verifier and its feedback state one rule."""

import json
from pathlib import Path

import pytest

from agents import triage

ROOT = Path(__file__).resolve().parents[2]

# Every shape of answer the prompt allows: a summary that starts with "Summary:", alone or after
# other text, its list on the same line or below it, in any case, dressed as Markdown.
OBEYING = [
    "Summary: filed two tickets and emailed payments on-call.",
    "summary: filed two tickets.",
    "SUMMARY: filed two tickets.",
    "I read the incident and the runbook.\n\nSummary: filed two tickets, triaged BUG-101.",
    "Summary:\n- filed TCK-1 (P1)\n- emailed payments-oncall@example.com",
    "Done with the backlog.\nSummary:\n\n- filed TCK-1",
    "**Summary:** filed two tickets.",
    "**Summary**: filed two tickets.",
    "## Summary:\n- filed two tickets",
    "  Summary : filed two tickets.  ",
]

REFUSED = [
    "",
    "I filed two tickets.",
    "In summary, I filed two tickets.",  # no line starts with the word
    "Summary of the work: two tickets.",  # not "Summary:"
    "Summary:",  # nothing follows it
    "I filed two tickets.\nSummary:\n\n",
    "Summary: filed two tickets.\nSummary:",  # the last summary line is the one checked, and it is empty
]


@pytest.mark.parametrize("answer", OBEYING)
def test_an_answer_in_a_shape_the_prompt_allows_passes(answer):
    assert triage.verify_summary(answer, []).ok


@pytest.mark.parametrize("answer", REFUSED)
def test_an_answer_without_a_summary_is_fed_back_the_prompts_rule(answer):
    verdict = triage.verify_summary(answer, [])
    assert not verdict.ok
    assert verdict.feedback == triage.SUMMARY_RULE


def test_the_prompt_and_the_feedback_state_the_same_rule():
    assert triage.SUMMARY_RULE in triage.SYSTEM_PROMPT
    assert "'Summary:'" in triage.SUMMARY_RULE


def test_a_model_that_follows_the_feedback_literally_passes():
    # The feedback says "finish your final answer with a summary ... that starts with 'Summary:'":
    # appending such a line to the rejected answer must pass.
    rejected = "I filed two tickets and sent one email."
    assert not triage.verify_summary(rejected, []).ok
    assert triage.verify_summary(rejected + "\nSummary: filed two tickets, sent one email.", []).ok


def test_the_shipped_scenarios_final_answers_pass():
    scenario = json.loads((ROOT / "events/scenarios/triage.json").read_text())
    finals = [turn["text"] for turn in scenario["turns"].values() if "text" in turn and not turn.get("tool_calls")]
    assert finals, "the triage scenario has a final answer"
    for answer in finals:
        assert triage.verify_summary(answer, []).ok, answer
