"""A run that reaches its first snapshot (every 50 turns by default) under the local IAM
enforcement: ModelTurn points the run record at the snapshot with an UpdateItem, which its role
must allow (it did not: every run of 50 turns or more failed at turn 50, on AWS as locally)."""

from __future__ import annotations

import json
from pathlib import Path

from longstep.settings import DEFAULT_SNAPSHOT_EVERY
from longstep_kit.local.runner import RunOptions, run_scenario
from longstep_kit.local.scenario import Scenario

TRIAGE = Path(__file__).resolve().parents[2] / "events" / "scenarios" / "triage.json"
DOC = "runbook-payments"


def test_a_run_past_its_first_snapshot_succeeds_with_iam_enforced(stack):
    assert stack.enforce
    turns = DEFAULT_SNAPSHOT_EVERY + 2
    base = json.loads(TRIAGE.read_text())
    script = {str(t): {"text": f"Step {t}.", "tool_calls": [{"name": "read_document", "input": {"doc_id": DOC}}]} for t in range(turns - 1)}
    script[str(turns - 1)] = {"text": "Summary: read the runbook; nothing to change."}
    scenario = Scenario.model_validate(
        {
            "name": "past-the-first-snapshot",
            "input": {"goal": "Read the runbook.", "agent": "triage", "max_turns": turns + 1},
            "world": {"documents": [d for d in base["world"]["documents"] if d["doc_id"] == DOC], "tickets": []},
            "turns": script,
        }
    )
    report = run_scenario(stack, scenario, RunOptions(timeout_seconds=600))
    assert report["status"] == "SUCCEEDED", (report.get("error"), report.get("cause"))
    assert report["escalations"] == []
    assert report["turns"] == turns
