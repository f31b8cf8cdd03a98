"""The eval report (longstep_kit.ops.eval_report) on exports built by hand: what counts as an
effect, and when the gate fails (an effect added alone, or removed alone; a read is never one)."""

from __future__ import annotations

from typing import Any

from longstep_kit.ops.eval_report import compare

EFFECTS = {"search_docs": {"effect": "read"}, "file_ticket": {"effect": "keyed"}, "send_email": {"effect": "at_most_once"}}
SEARCH = ("search_docs", {"query": "checkout"})
TICKET = ("file_ticket", {"title": "Retry storm", "priority": "P2"})
EMAIL = ("send_email", {"to": "a@example.com", "subject": "s", "body": "b"})
OK, REJECTED = {"status": "success", "content": {}}, {"status": "error", "content": {"rejected": True}}
WITHHELD = {"status": "error", "content": {"withheld": True}}


def _export(name: str, turns: list[list[tuple[str, dict, dict]]], answer: str = "Summary: done.") -> dict[str, Any]:
    """An export of a run whose turn N makes ``turns[N]``'s calls (tool, arguments, result), then answers."""
    script: dict[str, Any] = {}
    results: dict[str, Any] = {}
    for turn, calls in enumerate(turns):
        script[str(turn)] = {"tool_calls": [{"name": tool, "input": args} for tool, args, _ in calls]}
        results.update({f"{turn}:{i}": result for i, (_, _, result) in enumerate(calls)})
    script[str(len(turns))] = {"text": answer}
    return {"name": name, "input": {"agent": "triage"}, "turns": script, "recorded": {"tool_effects": EFFECTS, "tool_results": results}}


def _eval(result: dict, how: str) -> dict:
    return {**result, "eval": how}


def test_an_added_effect_alone_fails_the_gate():
    record = _export("r", [[(*SEARCH, OK)]])
    evaluated = _export("r-eval0", [[(*SEARCH, _eval(OK, "recorded"))], [(*TICKET, _eval(WITHHELD, "withheld"))]])
    report = compare(record, evaluated, 0, "SUCCEEDED", "SUCCEEDED")
    assert report.first_divergence == 1 and not report.gate_passed
    assert [(e["tool"], e["effect"]) for e in report.effects_added] == [("file_ticket", "keyed")] and report.effects_removed == []
    assert [(c["turn"], c["tool"]) for c in report.added] == [(1, "file_ticket")]


def test_a_removed_effect_alone_fails_the_gate_and_a_read_or_a_rejection_is_never_an_effect():
    record = _export("r", [[(*SEARCH, OK), (*TICKET, OK)], [(*EMAIL, REJECTED)]])
    evaluated = _export("r-eval0", [[(*TICKET, _eval(OK, "recorded"))], [(*EMAIL, _eval(REJECTED, "recorded"))]])
    report = compare(record, evaluated, 0, "SUCCEEDED", "SUCCEEDED")
    # The search is gone and the ticket moved up a place: calls differ, effects do not.
    assert report.first_divergence == 0 and report.gate_passed
    dropping_the_ticket = _export("r-eval1", [[(*SEARCH, _eval(OK, "recorded"))], [(*EMAIL, _eval(REJECTED, "recorded"))]])
    report = compare(record, dropping_the_ticket, 0, "SUCCEEDED", "SUCCEEDED")
    assert [e["tool"] for e in report.effects_removed] == ["file_ticket"] and report.effects_added == [] and not report.gate_passed


def test_only_the_turns_from_the_fork_point_are_compared():
    record = _export("r", [[(*TICKET, OK)], [(*SEARCH, OK)]])
    evaluated = _export("r-eval1", [[(*TICKET, _eval(OK, "recorded"))], [(*SEARCH, _eval(OK, "recorded"))]], answer="Summary: other.")
    report = compare(record, evaluated, 1, "SUCCEEDED", None)
    assert report.first_divergence == 2 and report.gate_passed  # the answer differs; turn 0's ticket is not counted
    assert report.answered == {"recorded": 1, "live": 0, "withheld": 0, "rejected": 0}
