"""Twelve random faults (``--faults random:12 --seed 7``, the README's crash command) on a stack of
their own, as ``longstep local run`` has it: the clean run's transcript, no second side effect.

(It once hung on the crash campaign's shared stack: each ``--restart-at`` run leaked a hold on the
virtual clock, so a later retry's backoff never passed; test_virtual_clock.py covers that now.)
"""

from __future__ import annotations

from longstep_kit.local.faults import random_faults

from .test_crash_campaign import MODEL_BILLED, TURNS, _assert_same_run, _run


def test_clean_run_then_twelve_random_faults_seed_7(stack, triage):
    clean = _run(stack, triage)
    assert clean["status"] == "SUCCEEDED" and clean["effects"]["duplicate_effects"] == 0
    plan = random_faults("random:12", 7, TURNS)
    assert plan == random_faults("random:12", 7, TURNS)  # reproducible
    report = _run(stack, triage, faults=plan)
    _assert_same_run(report, clean)
    assert len(report["faults_injected"]) >= 10  # a few may name a step a turn does not have
    billed = sum(1 for f in report["faults_injected"] if f["point"] in MODEL_BILLED)
    assert report["model_calls"]["executed"] <= clean["model_calls"]["executed"] + billed
