"""The README's command blocks, run as written (``tests/local/doc_blocks.py`` states the convention),
and what else the README and the docs' examples promise."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.local.doc_blocks import BLOCKS, REPO_ROOT, RUNNABLE, run_block

README_BLOCKS = [b for b in RUNNABLE if b.path.name == "README.md"]


def test_every_command_block_is_marked():
    unmarked = [b.name for b in BLOCKS if b.marker is None]
    assert not unmarked, f"command blocks without a <!-- doc-test: ... --> marker: {unmarked}"
    assert len(RUNNABLE) >= 5  # the README's local blocks among them


@pytest.mark.parametrize("block", README_BLOCKS, ids=[b.name for b in README_BLOCKS])
def test_the_block_runs_as_written(block, tmp_path: Path):
    ran = run_block(block, tmp_path)
    assert [r.problem for r in ran if r.problem] == []
    assert [r.command for r in ran] == list(block.commands)  # every command ran, none was skipped


def test_the_readme_picture_of_the_state_machine_names_its_real_states():
    import json

    readme = (REPO_ROOT / "README.md").read_text()
    picture = readme.split("```mermaid", 1)[1].split("```", 1)[0]
    drawn = set(re.findall(r"\b([A-Z][A-Za-z]+)\b", picture)) - {"flowchart", "LR"}
    states = set(json.loads((REPO_ROOT / "tests" / "infra" / "golden" / "state_machine.asl.json").read_text())["States"])
    assert drawn and drawn <= states, f"drawn but not in the state machine: {sorted(drawn - states)}"
    named = set(re.findall(r"`([A-Z][A-Za-z]+)`", readme.split("```mermaid", 1)[1].split("## Quick start", 1)[0]))
    inner = {
        name
        for state in json.loads((REPO_ROOT / "tests" / "infra" / "golden" / "state_machine.asl.json").read_text())["States"].values()
        for name in state.get("ItemProcessor", {}).get("States", {})
    }
    assert named - {"CallTool"} <= states | inner, sorted(named - states - inner)


def test_the_agent_tables_example_reads_what_the_run_wrote():
    from examples.runs.read_agent_tables import tickets_after_triage

    status, tables, tickets = tickets_after_triage()
    assert status == "SUCCEEDED"
    assert {"documents", "tickets"} <= set(tables)
    filed = [t for t in tickets if t.get("idempotency_key", "").startswith("triage-tables:")]
    assert len(filed) == 2, tickets  # the two tickets the run filed (the world's BUG-101 and BUG-102 besides)
    assert {t["ticket_id"] for t in tickets} >= {"BUG-101", "BUG-102"}
