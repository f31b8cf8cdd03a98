"""docs/your-agent.md's agent (the template's, re-exported by examples/your_agent) registered beside the sample and run on the
local stack from the command line: a crash right after its payment is resolved by the probe, and
the ledgers count every effect once."""

from __future__ import annotations

import json
from pathlib import Path

from longstep_kit import cli

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "infra" / "templates" / "project" / "events" / "scenarios" / "invoice.json"
AGENT = "invoice=examples.your_agent:build"


def test_a_crash_after_the_payment_is_answered_by_the_probe(tmp_path, capsys):
    report_path = tmp_path / "report.json"
    code = cli.main(["local", "run", str(SCENARIO), "--quiet", "--agent", AGENT, "--fault", "after_effect@1", "--report", str(report_path)])
    out = capsys.readouterr().out
    report = json.loads(report_path.read_text())
    assert code == 0, out
    assert [(f["point"], f["turn"]) for f in report["faults_injected"]] == [("after_effect", 1)]
    assert report["status"] == "SUCCEEDED" and report["escalations"] == []  # no human was asked
    assert report["effects"] == {
        "by_tool": {"mark_paid": 1, "pay_invoice": 1, "record_invoice": 2},
        "duplicate_effects": 0,
        "duplicates": {},
        "not_counted": [],
    }
    assert [(a["tool"], a["status"]) for a in report["approvals"]] == [("pay_invoice", "approved")]
    assert "effects: mark_paid 1, pay_invoice 1, record_invoice 2; 0 duplicates" in out
