"""Scenario checks before deploying (against the agent's registry and world model), and the
expectations checked after a run."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from agents import triage
from agents.triage_world import TriageWorld
from longstep_kit.local.scenario import Scenario, ScenarioError, check_against_agent, unmet_expectations

TRIAGE = json.loads((Path(__file__).resolve().parents[2] / "events" / "scenarios" / "triage.json").read_text())
AGENT = triage.build()


def _check(change=None) -> object:
    data = copy.deepcopy(TRIAGE)
    if change:
        change(data)
    return check_against_agent(Scenario.model_validate(data), AGENT, "triage.json")


def test_the_sample_scenario_fits_its_agent_and_gives_its_world():
    world = _check()
    assert isinstance(world, TriageWorld)
    assert [d.doc_id for d in world.documents] == ["incident-2041", "runbook-payments", "arch-orders"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["turns"].pop("0"), "triage.json: turns: the script has no turn 0"),
        (lambda d: d["turns"]["2"]["tool_calls"][0].update(name="file_tiket"), "triage.json: turns.2.tool_calls.0.name: unknown tool 'file_tiket'"),
        (
            lambda d: d["turns"]["3"]["tool_calls"][1]["input"].update(status="done"),
            "triage.json: turns.3.tool_calls.1.input: arguments of update_ticket: status:",
        ),
        (lambda d: d["turns"]["1"]["tool_calls"][1].update(id="t1c0"), "triage.json: turns.1.tool_calls.1.id: 't1c0' is also the id of call 1:0"),
        (lambda d: d["approvals"].update({"9:0": {"decision": "approve"}}), "triage.json: approvals.9:0: the script has no call 9:0"),
        (lambda d: d["approvals"].update({"7:1": {"decision": "approve"}}), "triage.json: approvals.7:1: the script has no call 7:1"),
        (lambda d: d["approvals"].update({"2:0": {"decision": "approve"}}), "triage.json: approvals.2:0: file_ticket does not require approval"),
        (lambda d: d["approvals"]["7:0"]["input"].pop("subject"), "triage.json: approvals.7:0.input: arguments of send_email: subject:"),
        (lambda d: d["world"]["documents"][0].pop("title"), "triage.json: world.documents.0.title: Field required"),
        (lambda d: d["world"].update(invoices=[]), "triage.json: world.invoices: Extra inputs are not permitted"),
    ],
    ids=[
        "no-turn-0",
        "unknown-tool",
        "bad-args",
        "duplicate-id",
        "approval-no-turn",
        "approval-no-call",
        "approval-not-needed",
        "edit-bad-args",
        "world-missing-field",
        "world-unknown-field",
    ],
)
def test_a_scenario_that_does_not_fit_its_agent_is_refused_in_one_line(change, message):
    with pytest.raises(ScenarioError) as caught:
        _check(change)
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_calls_wrong_on_purpose_are_not_checked():
    def wrong(d):
        d["turns"]["2"]["tool_calls"][0]["input"] = {"priority": "urgent"}
        d["invalid_calls"] = ["2:0"]

    assert _check(wrong) is not None


def test_a_world_needs_an_agent_with_a_world_model():
    from dataclasses import replace

    with pytest.raises(ScenarioError, match="world: agent 'triage' declares no world model"):
        check_against_agent(Scenario.model_validate(TRIAGE), replace(AGENT, world=None))


def test_call_ids_name_the_scripted_call_a_recorded_reply_came_from():
    data = copy.deepcopy(TRIAGE)
    data["turns"]["5"]["tool_calls"][0]["id"] = "mail-1"
    ids = Scenario.model_validate(data).call_ids()
    assert ids["t7c0"] == "7:0" and ids["t1c1"] == "1:1" and ids["mail-1"] == "5:0" and "t5c0" not in ids


REPORT = {
    "status": "SUCCEEDED",
    "output": "Summary: filed two tickets",
    "effects": {"by_tool": {"send_email": 2}, "duplicate_effects": 0, "duplicates": {}},
}


def test_a_report_that_meets_the_expectations_has_no_differences():
    scenario = Scenario.model_validate({**TRIAGE, "expect": {"output_contains": ["filed two tickets"], "effects": {"send_email": 2}}})
    assert unmet_expectations(scenario.expect, REPORT) == []


def test_each_unmet_expectation_is_one_line_showing_the_difference():
    scenario = Scenario.model_validate({**TRIAGE, "expect": {"output_contains": ["three tickets"], "effects": {"send_email": 1, "pay": 1}}})
    report = {
        **REPORT,
        "status": "FAILED",
        "effects": {"by_tool": {"send_email": 2}, "duplicate_effects": 1, "duplicates": {"send_email": {"r:5:0": 2}}},
    }
    assert unmet_expectations(scenario.expect, report) == [
        "status: expected SUCCEEDED, got FAILED",
        "output_contains: 'three tickets' is not in the output",
        "duplicate_effects: expected 0, got 1 (r:5:0 x2)",
        "effects.pay: expected 1, got no ledger",
        "effects.send_email: expected 1, got 2",
    ]
