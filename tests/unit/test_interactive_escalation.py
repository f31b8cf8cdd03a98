"""The local interactive answerer offers a skip only where the step has a result to give."""

from __future__ import annotations

import builtins

import pytest

from longstep_kit.local import answers


@pytest.mark.parametrize(("task", "offered"), [("Init", False), ("WaitForEvent", False), ("CallTool", True)])
def test_a_skip_is_offered_only_for_a_step_with_a_result(monkeypatch, task, offered):
    prompts: list[str] = []
    replies = iter(["s", "[1]", "r"])

    def ask(prompt: str = "") -> str:
        prompts.append(prompt)
        return next(replies)

    monkeypatch.setattr(builtins, "input", ask)
    resolution = answers._ask_escalation({"task": task, "turn": 0, "error": "ModelAccessError", "reason": "boom"})
    assert ("[s]kip" in prompts[0]) is offered
    # Offered: "s" asks for the result and skips with it; refused: "s" and "[1]" are not answers.
    assert resolution.action == ("skip" if offered else "retry")
    assert len(prompts) == (2 if offered else 3)
