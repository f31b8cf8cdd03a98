"""A local run's report says who aborted it: the local answerer (``--approve auto``/``reject``) is
not a person, though the state machine's cause says "a human aborted the run"."""

from __future__ import annotations

from longstep_kit.local.report import aborted_cause

HUMAN = "a human aborted the run at an escalation"


def _report(*resolvers: str) -> dict:
    return {"error": "EscalationAborted", "escalations": [{"resolution": {"action": "abort", "resolver": r}} for r in resolvers]}


def test_the_local_answerer_is_named():
    assert aborted_cause(_report("local-auto"), HUMAN) == "the local run's answerer (local-auto, not a person) aborted the run at an escalation"


def test_a_person_keeps_the_cause():
    assert aborted_cause(_report("local-interactive"), HUMAN) == HUMAN
    assert aborted_cause(_report("arn:aws:iam::123456789012:user/alice"), HUMAN) == HUMAN
    assert aborted_cause({"error": "States.TaskFailed", "escalations": []}, "boom") == "boom"
