"""Effects checked from the agent's own hooks on the local stack: the ledger counts a real
duplicate (and the CLI's exit code says so), the probe answers a crash right after an email went
out, a scripted human does not guess when there is no probe, and a world fixture larger than a
DynamoDB item is loaded where the agent's tools read it."""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path

import pytest

from agents import triage as triage_agent
from agents.triage_world import part_id
from longstep import faults
from longstep.tools.registry import ToolContext
from longstep_kit import cli
from longstep_kit.local.faults import Fault
from longstep_kit.local.runner import RunOptions, run_scenario
from longstep_kit.local.scenario import Scenario
from longstep_kit.local.world import agent_context
from tests.local.conftest import sent_emails

ROOT = Path(__file__).resolve().parents[2]
DOUBLER = ROOT / "tests" / "fixtures" / "doubler.json"
_names = itertools.count()


def _run(stack, scenario, **options):
    stack.reset_data()
    return run_scenario(stack, scenario, RunOptions(run_id="effects", execution_name=f"effects-{next(_names)}", **options))


def test_the_ledger_catches_a_tool_that_acts_twice_and_the_exit_code_says_so(tmp_path, capsys):
    report_path = tmp_path / "doubler.json"
    code = cli.main(["local", "run", str(DOUBLER), "--quiet", "--agent", "doubler=tests.fixtures.agents.doubler:build", "--report", str(report_path)])
    out = capsys.readouterr().out
    report = json.loads(report_path.read_text())
    assert report["status"] == "SUCCEEDED"  # the run itself went fine: only the ledger shows the harm
    assert report["effects"]["by_tool"] == {"pay": 2}
    assert report["effects"]["duplicate_effects"] >= 1
    assert report["effects"]["duplicates"] == {"pay": {"doubler:0:0": 2}}
    assert code == 1
    assert "expectation not met: duplicate_effects: expected 0, got 1 (doubler:0:0 x2)" in out


def test_a_crash_right_after_an_email_is_resolved_by_the_probe_without_a_human(stack, triage):
    report = _run(stack, triage, faults=[Fault(faults.AFTER_EFFECT, 5)])
    assert [(f["point"], f["turn"]) for f in report["faults_injected"]] == [("after_effect", 5)]
    assert report["status"] == "SUCCEEDED" and report["escalations"] == []
    assert report["effects"]["by_tool"]["send_email"] == 2 and report["effects"]["duplicate_effects"] == 0
    assert [to for to, _ in sent_emails(stack, "effects")] == ["payments-oncall@example.com", "team-orders@example.com"]


def test_without_a_probe_the_scripted_human_aborts_rather_than_guess(stack, triage, monkeypatch):
    with agent_context(stack, "triage") as agent:  # the very agent the handlers use (built once per process)
        monkeypatch.setitem(agent.tools.tools, "send_email", dataclasses.replace(agent.tools.tools["send_email"], probe=None))
    report = _run(stack, triage, faults=[Fault(faults.AFTER_EFFECT, 5)])
    (escalation,) = report["escalations"]
    assert (escalation["turn"], escalation["error"]) == (5, "OutcomeUnknownError")
    assert "the tool declares no probe" in escalation["reason"]
    assert escalation["resolution"]["action"] == "abort"
    assert report["status"] != "SUCCEEDED"
    assert report["effects"]["by_tool"]["send_email"] == 1 and report["effects"]["duplicate_effects"] == 0


def test_a_document_larger_than_a_dynamodb_item_is_read_whole(stack):
    body = "0123456789abcdef" * 65_536  # 1 MiB: more than twice the 400 KB item limit
    scenario = Scenario.model_validate(
        {
            "name": "large-document",
            "input": {"goal": "Read the big log.", "agent": "triage", "max_turns": 3},
            "world": {"documents": [{"doc_id": "big-log", "title": "Big log", "summary": "all of it", "body": body}]},
            "turns": {
                "0": {"tool_calls": [{"name": "search_docs", "input": {"query": "big"}}, {"name": "read_document", "input": {"doc_id": "big-log"}}]},
                "1": {"text": "Summary: read the big log."},
            },
        }
    )
    report = _run(stack, scenario)
    assert report["status"] == "SUCCEEDED"
    ctx = ToolContext(run_id="effects", turn=0, call=1, idempotency_key="effects:0:1")
    with agent_context(stack, "triage"):
        read = triage_agent.read_document(triage_agent.ReadDocumentArgs(doc_id="big-log"), ctx)
        found = triage_agent.search_docs(triage_agent.SearchDocsArgs(query="big"), ctx)
        with pytest.raises(Exception, match="no document"):  # a part is not a document of its own
            triage_agent.read_document(triage_agent.ReadDocumentArgs(doc_id=part_id("big-log", 0)), ctx)
    assert read["body"] == body
    assert [hit["doc_id"] for hit in found["results"]] == ["big-log"]


def test_a_scenario_that_does_not_fit_its_agent_stops_before_deploying(tmp_path, capsys):
    scenario = json.loads((ROOT / "events" / "scenarios" / "triage.json").read_text())
    scenario["approvals"]["8:0"] = {"decision": "approve"}
    path = tmp_path / "bad-approval.json"
    path.write_text(json.dumps(scenario))
    assert cli.main(["local", "run", str(path)]) == 2
    out, err = capsys.readouterr()
    assert "deploying" not in out
    assert err.strip() == f"error: {path}: approvals.8:0: the script has no call 8:0 (keys are 'turn:call' of the script)"


def test_an_unknown_agent_or_a_malformed_agent_option_exits_2(tmp_path, capsys):
    assert cli.main(["local", "run", str(DOUBLER)]) == 2  # doubler is not in cdk.json
    assert "input.agent: unknown agent 'doubler'" in capsys.readouterr().err
    assert cli.main(["local", "run", str(DOUBLER), "--agent", "doubler"]) == 2
    assert "--agent 'doubler': expected NAME=module:callable" in capsys.readouterr().err
