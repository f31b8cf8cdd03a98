"""One local stack per test module: synthesized once per session, deployed into a fresh moto."""

from __future__ import annotations

from pathlib import Path

import pytest

from longstep_kit.local.scenario import load_scenario
from longstep_kit.local.stack import LocalStack

SCENARIOS = Path(__file__).resolve().parents[2] / "events" / "scenarios"


@pytest.fixture(scope="module")
def stack():
    with LocalStack() as local:
        yield local


@pytest.fixture(scope="session")
def triage():
    return load_scenario(SCENARIOS / "triage.json")
