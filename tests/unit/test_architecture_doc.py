"""docs/architecture.md stays true: its diagram names every state of the synthesized state machine,
and its module tables name every module of ``layers/runtime`` and ``infra``, and nothing else.

The states come from the golden copy of the synthesized definition, which
``tests/infra/test_state_machine.py`` keeps equal to what ``cdk synth`` produces.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
DOC = REPO_ROOT / "docs" / "architecture.md"
GOLDEN_ASL = REPO_ROOT / "tests" / "infra" / "golden" / "state_machine.asl.json"
# Per-agent states are named after the agent (``BindAgent-triage``, ``BindEval-triage``); the doc shows the pattern.
PER_AGENT_STATE = re.compile(r"^(BindAgent|BindEval)-[A-Za-z0-9_-]+$")
PACKAGES = {"layers/runtime": "### `layers/runtime/`", "functions": "### `functions/`", "infra": "### `infra/`"}
# ``longstep init``'s templates are package data copied into new projects, not modules of the kit.
NOT_MODULES = ("templates/project/",)


def _states(definition: dict[str, Any]) -> Iterator[str]:
    for name, state in definition["States"].items():
        yield name
        for key in ("ItemProcessor", "Iterator"):
            if key in state:
                yield from _states(state[key])
        for branch in state.get("Branches", []):
            yield from _states(branch)


def _doc() -> str:
    return DOC.read_text()


def _diagram() -> str:
    section = _doc().split("## The state machine", 1)[1]
    return section.split("```\n", 2)[1]


def _section(heading: str) -> str:
    text = _doc()
    assert heading in text, f"docs/architecture.md has no section {heading!r}"
    return re.split(r"^#{2,3} ", text.split(heading, 1)[1], maxsplit=1, flags=re.MULTILINE)[0]


def _module_files(folder: str) -> set[str]:
    """Each module of a package and each subpackage, relative to it (``store.py``, ``tasks/``, ``tasks/init_run.py``).

    A subpackage's ``__init__.py`` is the subpackage itself; the package's own is the section's heading.
    """
    root = REPO_ROOT / folder
    names = set()
    for path in root.rglob("*.py"):
        relative = path.relative_to(root).as_posix()
        skipped = next((prefix for prefix in NOT_MODULES if relative.startswith(prefix)), None)
        if skipped is not None:
            names.add(skipped)
            continue
        if path.parent != root:
            names.add(path.parent.relative_to(root).as_posix() + "/")
        if path.name != "__init__.py":
            names.add(relative)
    return names


def test_the_diagram_names_every_state_of_the_synthesized_definition():
    states = {PER_AGENT_STATE.sub(r"\1-<agent>", name) for name in _states(json.loads(GOLDEN_ASL.read_text()))}
    assert {"BindAgent", "WaitForEvent", "WaitTimer", "CheckCondition", "ContinueAsNew", "EscalateCallTool"} <= states
    words = set(re.findall(r"[A-Za-z][A-Za-z0-9]*(?:-<agent>)?", _diagram()))
    assert sorted(states - words) == [], "docs/architecture.md: draw these states in the diagram"


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_the_module_tables_name_every_module_and_nothing_else(package):
    named = set(re.findall(r"`([a-z_/]+(?:\.py|/))`", _section(PACKAGES[package])))
    actual = _module_files(package)
    assert sorted(actual - named) == [], f"docs/architecture.md: add these modules of {package}/ to its table"
    assert sorted(named - actual) == [], f"docs/architecture.md: these modules of {package}/ no longer exist"
