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


CLEAN = {
    "status": "SUCCEEDED",
    "effects": {"duplicate_effects": 0, "tickets": 1},
    "transcript_sha256": "a",
    "timer_free_sha256": "masked",
    "timer_ends": ["2026-01-03T00:00:00Z", "2026-01-03T01:00:00Z"],
}


def _faulted(**changes):
    return {**CLEAN, "transcript_sha256": "b", "retried_seconds": 1.4, **changes}


def test_a_run_gives_its_clean_run_with_its_timers_ending_later_by_no_more_than_its_retries_waited():
    from bench.faults.campaign import same_agent_run, timer_shifts

    later = _faulted(timer_ends=["2026-01-03T00:00:01Z", "2026-01-03T01:00:01Z"])
    assert same_agent_run(later, CLEAN) and timer_shifts(later, CLEAN) == [1.0, 1.0]
    assert same_agent_run({**CLEAN, "retried_seconds": 0}, CLEAN)  # the same transcript
    assert not same_agent_run({**later, "retried_seconds": 0.9}, CLEAN)  # later than its retries explain
    assert not same_agent_run(_faulted(timer_ends=["2026-01-02T23:59:59Z", "2026-01-03T01:00:00Z"]), CLEAN)  # earlier
    assert not same_agent_run({**later, "timer_free_sha256": "other"}, CLEAN)  # something else in the transcript differs
    assert not same_agent_run({**later, "effects": {"duplicate_effects": 0, "tickets": 2}}, CLEAN)
    assert not same_agent_run({**later, "status": "FAILED"}, CLEAN)
    assert not same_agent_run(_faulted(timer_ends=["2026-01-03T00:00:01Z"]), CLEAN)  # a timer missing


def test_the_section_says_which_runs_ended_a_timer_later():
    row = {"scenario": "wait_for_timer", "random": 2, "drawn": ["after_model@0"], "fired": True, "same_run": True, "duplicates": 0}
    rows = [{**row, "status": "SUCCEEDED", "timers_later_by": [1.0, 1.0]}]
    section = render({**summarize(rows), "seconds_per_scenario": {}})
    assert "1 runs gave the clean run but for a timer that ended later" in section
    assert "wait_for_timer drawn after_model@0 (+1, +1 s)" in section


def test_the_kill_entry_kills_a_worker_after_each_kind_of_write_and_several_in_one_run():
    from bench.faults.campaign import KILL, cases
    from bench.faults.kill_campaign import ENTRY, kill_cases
    from longstep_kit.local.faults import parse_fault

    assert ENTRY == KILL
    planned = [spec for case in kill_cases() for spec in case["faults"]]
    parsed = [parse_fault(spec) for spec in planned]  # each one a valid kill
    assert {p.point for p in parsed} >= {"kill.init_run", "kill.model_turn", "kill.call_tool", "kill.request_approval", "kill.finish"}
    assert {"PutItem", "UpdateItem", "PutObject"} <= {spec.split(":")[1] for spec in planned if spec.count(":")}
    assert any(len(case["faults"]) > 1 for case in kill_cases())
    assert not any(f.startswith("kill.") for case in cases(3) for f in case.get("faults", []))  # in-process entries: no kills
