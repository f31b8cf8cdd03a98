"""An eval run's answers (longstep.evals): the record first, then the approval policy, then reads
live, and every other effect withheld, its tool never called."""

from __future__ import annotations

import json

from agents.triage import build
from longstep.evals import LIVE, RECORDED, REJECTED, WITHHELD, answer
from longstep_kit.ops.replay import ExportArtifacts

TICKET = {"title": "Retry storm", "body": "No backoff.", "priority": "P2"}
EMAIL = {"to": "a@example.com", "subject": "s", "body": "b"}


def _answers(approvals: str) -> tuple[dict[str, str], list[str]]:
    """How each call is answered under ``approvals``, and the calls that ran live."""
    artifacts = ExportArtifacts({})
    recorded = {"status": "success", "content": {"ticket_id": "BUG-200"}}
    uri = artifacts.put(json.dumps({"run_id": "r", "calls": [{"tool": "file_ticket", "args": TICKET, "result": recorded}]}).encode())["uri"]
    setting = {"of": "r", "record_uri": uri, "approvals": approvals}
    agent, ran = build(), []

    def live(name: str):
        def run(args):
            ran.append(name)
            return {"status": "success", "content": {"ran": name}}

        return run

    calls = {
        "recorded": ("file_ticket", dict(reversed(list(TICKET.items())))),  # the same arguments in another key order
        "changed": ("file_ticket", {**TICKET, "priority": "P3"}),
        "read": ("search_docs", {"query": "checkout"}),
        "approval": ("send_email", EMAIL),
        "bad_args": ("file_ticket", {"title": "x", "priority": "urgent"}),
        "unknown": ("no_such_tool", {}),
    }
    out = {key: answer(artifacts, agent, setting, name, args, live(name))["eval"] for key, (name, args) in calls.items()}
    return out, ran


def test_the_record_answers_first_then_reads_run_live_and_other_effects_are_withheld():
    out, ran = _answers("withhold")
    assert out == {"recorded": RECORDED, "changed": WITHHELD, "read": LIVE, "approval": WITHHELD, "bad_args": LIVE, "unknown": LIVE}
    assert "send_email" not in ran and ran.count("file_ticket") == 1  # only the call its arguments refuse, before any effect


def test_the_approval_policy_answers_an_unrecorded_call_that_needs_an_approver():
    assert _answers("reject")[0]["approval"] == REJECTED
    approved, ran = _answers("approve")
    assert approved["approval"] == WITHHELD and "send_email" not in ran  # approved, it is still an effect: withheld
