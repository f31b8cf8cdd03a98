"""Every repository path a doc names in backticks (``infra/...``, ``tests/...``) exists: docs follow the code when it moves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([REPO_ROOT / "README.md", *(REPO_ROOT / "docs").glob("*.md")])
# A path into one of the repository's own trees; patterns (``*``) and placeholders (``<agent>``) are left out.
# Docs about a project made by ``longstep init`` name that project's files (``agents/invoice.py``).
PROJECT_TEMPLATE = REPO_ROOT / "infra" / "templates" / "project"
REPO_PATH = re.compile(r"`((?:infra|functions|layers|tests|docs|events|agents|bench|examples)/[^`\s*<>]*)`")


def named_paths(text: str) -> list[str]:
    """The repository paths named in backticks, without a pytest node id (``::test``)."""
    return [match.group(1).split("::")[0] for match in REPO_PATH.finditer(text)]


def test_named_paths_reads_paths_and_drops_node_ids():
    assert named_paths("see `infra/a.py`, `tests/b.py::test_c` and `infra/*.py`") == ["infra/a.py", "tests/b.py"]


@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: doc.relative_to(REPO_ROOT).as_posix())
def test_every_path_a_doc_names_exists(doc):
    missing = sorted({path for path in named_paths(doc.read_text()) if not (REPO_ROOT / path).exists() and not (PROJECT_TEMPLATE / path).exists()})
    assert missing == [], f"{doc.relative_to(REPO_ROOT)} names paths that do not exist"
