"""LangGraph's checkpointer conformance suite passes against ``LongstepSaver`` on moto: every base
capability and every extended one the saver implements (all of them), in the release installed
with the dev extra and in the newer copy in ``../shared`` when it is there (``make conformance-langgraph``)."""

from __future__ import annotations

import pytest

from bench.langgraph import conformance


def _assert_full(result: dict) -> None:
    failures = {name: r["failures"] for name, r in result["results"].items() if r["tests_failed"]}
    assert failures == {}, failures
    assert result["passed_all_base"] and result["passed_all"]
    # Every capability the suite knows is implemented: none reported as not detected.
    assert sorted(name for name, r in result["results"].items() if not r["detected"]) == []
    assert set(result["results"]) == set(result["capabilities"])


def test_the_installed_suite_passes_every_capability(capsys):
    result = conformance.run_installed()
    assert "Checkpointer Validation: LongstepSaver" in capsys.readouterr().out
    _assert_full(result)
    passed, failed, _ = conformance.counts(result)
    assert (passed, failed) == (81, 0)  # langgraph-checkpoint-conformance 0.0.2: 8 capabilities


def test_the_shared_copy_passes_every_capability_delta_channel_history_included():
    if not conformance.SHARED_COPY.is_dir():
        pytest.skip(f"no copy of the suite at {conformance.SHARED_COPY}")
    result = conformance.run_shared()
    assert result is not None and result["suite"].startswith(str(conformance.SHARED_COPY))
    _assert_full(result)
    assert "delta_channel_history" in result["results"]
    assert conformance.counts(result)[:2] == (89, 0)
