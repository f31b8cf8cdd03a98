"""One local stack per test module: synthesized once per session, deployed into a fresh moto."""

from __future__ import annotations

from pathlib import Path

import pytest

from longstep_kit.local.scenario import load_scenario
from longstep_kit.local.stack import LocalStack
from longstep_kit.local.world import agent_context

SCENARIOS = Path(__file__).resolve().parents[2] / "events" / "scenarios"


@pytest.fixture(scope="module")
def stack():
    with LocalStack() as local:
        yield local


@pytest.fixture(scope="session")
def triage():
    return load_scenario(SCENARIOS / "triage.json")


def sent_email_rows(stack, run_id: str) -> list[dict[str, str]]:
    """Every email the run sent (to, subject, body), read from the sample's outbox as its tools see it."""
    from agents import triage_world

    with agent_context(stack, "triage"):
        rows = triage_world.scan(triage_world.outbox())
    sent = [{field: r[field]["S"] for field in ("to", "subject", "body")} for r in rows if r["run_id"]["S"] == run_id]
    return sorted(sent, key=lambda row: (row["to"], row["subject"]))


def sent_emails(stack, run_id: str) -> list[tuple[str, str]]:
    """(to, subject) of every email the run sent."""
    return [(row["to"], row["subject"]) for row in sent_email_rows(stack, run_id)]
