"""A smoke row says what its run did beyond the scenario: a planned crash that did not happen
fails the row, a planned pause that did not happen is said in ``also`` (never silently passed)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from longstep_kit.cli import smoke, smoke_cmd
from longstep_kit.cli.smoke import Plan

EXPECTED = {"status": "SUCCEEDED", "transcript_sha256": "a" * 64, "transcript_clock_free_sha256": "b" * 64}


def _row(monkeypatch, plan: Plan, crashed: bool, paused: bool) -> dict:
    got = {
        "status": "SUCCEEDED",
        "transcript_sha256": "a" * 64,
        "transcript_clock_free_sha256": "b" * 64,
        "effects": {"duplicate_effects": 0, "duplicates": {}},
        "crashed_and_resumed": crashed,
        "paused_and_resumed": paused,
    }
    monkeypatch.setattr(smoke, "run_on_stack", lambda *args, **kwargs: got)
    scenario = SimpleNamespace(name="triage", expect=SimpleNamespace(duplicate_effects=0))
    return smoke_cmd._one(None, scenario, "smoke-1", plan, EXPECTED, 60, lambda line: None)


@pytest.mark.parametrize(
    ("crashed", "paused", "result", "also"),
    [
        (True, True, "PASS", "crash+resume, pause+resume"),
        (True, False, "PASS", "crash+resume, pause not tried (the run ended first)"),
        (False, True, "FAIL", "pause+resume"),
    ],
)
def test_what_a_planned_crash_and_pause_did_is_in_the_row(monkeypatch, crashed, paused, result, also):
    row = _row(monkeypatch, Plan(crash_after=4, pause_at=2), crashed, paused)
    assert (row["result"], row["also"]) == (result, also)
    assert ("the planned crash did not happen" in row["why"]) is (not crashed)


def test_a_run_without_a_plan_says_nothing_more(monkeypatch):
    row = _row(monkeypatch, Plan(), crashed=False, paused=False)
    assert (row["result"], row["also"], row["why"]) == ("PASS", "", "")
