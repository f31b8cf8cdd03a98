"""The fault campaign's totals and its RESULTS.md section: fired, duplicates and the runs that
differ (new or known), the fleet's entries among the scenarios."""

from __future__ import annotations

from bench.faults.campaign import summarize
from bench.faults.fleet_campaign import budget_cases, bulk_cases
from bench.faults.report import BEGIN, END, render

ROWS = [
    {"scenario": "triage", "faults": ["after_model@0"], "fired": True, "same_run": True, "duplicates": 0, "status": "SUCCEEDED"},
    {"scenario": "triage", "faults": ["after_tool@9"], "fired": False, "same_run": True, "duplicates": 0, "status": "SUCCEEDED"},
    {"scenario": "release", "faults": ["after_effect@5"], "fired": True, "same_run": False, "duplicates": 0, "status": "FAILED"},
    {"scenario": "fleet", "entry": "budget", "faults": ["after_effect@2"], "fired": True, "same_run": False, "duplicates": 1, "status": "STOPPED"},
    {"scenario": "fleet", "entry": "bulk", "crash": ["acted", 1], "fired": True, "same_run": True, "duplicates": 0, "status": "SUCCEEDED"},
]


def test_the_totals_count_what_fired_and_what_repeated():
    summary = summarize(ROWS)
    assert (summary["runs"], summary["fired"], summary["duplicates"]) == (5, 4, 1)
    assert [r["scenario"] for r in summary["fired_and_different"]] == ["fleet"]
    assert [r["scenario"] for r in summary["known_failures"]] == ["release"]  # a known outcome


def test_the_section_has_the_totals_each_scenario_and_each_run_that_differs():
    section = render({**summarize(ROWS), "seconds_per_scenario": {"fleet": 12.5}})
    assert section.startswith(BEGIN) and section.rstrip().endswith(END)
    assert "**5 runs, 4 fired, 1 duplicates**" in section
    assert "| fleet | 2 | 2 | 1 | 1 | 12.5 |" in section and "| triage | 2 | 1 | 0 | 0 |  |" in section
    assert "- fleet, faults after_effect@2: STOPPED; new: " in section
    assert "- release, faults after_effect@5: FAILED; known: " in section


def test_the_fleet_entries_cover_every_stage_of_a_bulk_operation_and_the_budget_approval():
    bulk, asks = bulk_cases(), budget_cases()
    assert {tuple(c["crash"]) for c in bulk if "crash" in c} == {(s, k) for s in ("before", "before-start", "acted") for k in range(3)}
    kinds = {c["faults"][0].partition(".")[0] if "." in c["faults"][0].split("@")[0] else "crash" for c in asks if "faults" in c}
    assert kinds == {"crash", "zombie", "lost_ack", "skew"} and any(c.get("approver_dies") for c in asks)
