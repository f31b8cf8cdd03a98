"""One local stack per test module: synthesized once per session, deployed into a fresh moto."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from longstep_kit.local.runner import RunOptions, run_scenario
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


@pytest.fixture(scope="session")
def delegate():
    return load_scenario(SCENARIOS / "delegate.json")


@pytest.fixture(scope="session")
def release():
    from longstep_kit.local.workflow_run import load_workflow_scenario

    return load_workflow_scenario(SCENARIOS / "release.json")


def release_ledger(stack) -> Counter:
    """What the release workflow's steps did, by kind, from its ledger table (its effects' record)."""
    from longstep_kit.local.workflow_run import workflow_tables

    table = workflow_tables(stack, "release")["release_ledger"]
    return Counter(item["kind"]["S"] for item in stack.client("dynamodb").scan(TableName=table)["Items"])


def delegate_context(**settings: Any) -> dict[str, Any]:
    """A stack context serving the delegate scenario: the project's agents and the ones the
    scenario names (its ``agents``: the lead and research agents), with deployment ``settings``."""
    from longstep_kit.project import agent_catalog

    agents = load_scenario(SCENARIOS / "delegate.json").agents
    return {"longstep": {"agents": {**agent_catalog().references, **agents}, **settings}}


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


class Background:
    """``run_scenario`` in a thread, while the test plays the humans (``approve="external"``)."""

    def __init__(self, stack, scenario: Any, options: RunOptions) -> None:
        self.report: dict[str, Any] | None = None
        self.error: BaseException | None = None

        def run() -> None:
            try:
                self.report = run_scenario(stack, scenario, options)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
                self.error = exc

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def result(self, timeout: float = 60.0) -> dict[str, Any]:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the run did not finish"
        if self.error is not None:
            raise self.error
        assert self.report is not None
        return self.report
