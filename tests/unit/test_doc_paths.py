"""Every repository path a doc names in backticks (``infra/...``, ``tests/...``) exists, and so does
every path and module a comment or docstring of the repository's Python names: docs and comments
follow the code when it moves, and none cites a file outside the repository."""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from pathlib import Path
from typing import Iterator

import pytest

from longstep_kit.config import DeploymentConfig
from longstep_kit.constructs.signal_bus import SIGNAL_SOURCE

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([REPO_ROOT / "README.md", *(REPO_ROOT / "docs").glob("*.md")])
# A path into one of the repository's own trees; patterns (``*``) and placeholders (``<agent>``) are left out.
# Docs about a project made by ``longstep init`` name that project's files (``functions/invoice.py``).
PROJECT_TEMPLATE = REPO_ROOT / "infra" / "templates" / "project"
REPO_PATH = re.compile(r"`((?:infra|functions|layers|tests|docs|events|agents|bench|examples)/[^`\s*<>]*)`")
# The folders the three packages are built from (setup.py): a comment may name a module by its package path.
PACKAGE_DIRS = {"longstep": "layers/runtime", "longstep_kit": "infra", "longstep_functions": "functions"}
# In comments and docstrings a path stands without backticks: a repository folder's path, or a
# package's module file (``longstep/<module>.py``; ``longstep/anthropic`` is a secret's name).
COMMENT_PATH = re.compile(
    r"(?<![\w./-])((?:infra|functions|layers|tests|docs|events|agents|bench|examples)/[\w./-]*[\w/]"
    r"|(?:longstep_kit|longstep_functions|longstep)/[\w/]*\.py)(?![\w*<])"
)
MODULE = re.compile(r"(?<![\w.])((?:longstep_kit|longstep_functions|longstep)(?:\.\w+)+)")
# Dotted names under ``longstep`` that are not modules: cdk.json's context keys and the signal source.
NOT_MODULES = {f"longstep.{key}" for key in DeploymentConfig.model_fields} | {SIGNAL_SOURCE}
# Design notes cited by section live in docs/design.md; this is the file they were once cited from.
OUTSIDE = re.compile(r"\bDESIGN\.md\b")


def named_paths(text: str) -> list[str]:
    """The repository paths named in backticks, without a pytest node id (``::test``)."""
    return [match.group(1).split("::")[0] for match in REPO_PATH.finditer(text)]


def _exists(path: str) -> bool:
    head, _, rest = path.rstrip("/.").partition("/")
    relative = f"{PACKAGE_DIRS[head]}/{rest}" if head in PACKAGE_DIRS else f"{head}/{rest}"
    return (REPO_ROOT / relative).exists() or (PROJECT_TEMPLATE / relative).exists()


def _module_exists(dotted: str) -> bool:
    """``longstep.humans.table`` (a module) or ``longstep.humans.requests.view`` (a name in one) exists."""
    if dotted in NOT_MODULES:
        return True
    root, *parts = dotted.split(".")
    here = REPO_ROOT / PACKAGE_DIRS[root]
    while parts and (here / parts[0]).is_dir():
        here = here / parts.pop(0)
    if parts and (here / f"{parts[0]}.py").is_file():
        here = here / f"{parts.pop(0)}.py"
    if not parts:
        return True
    source = here if here.suffix == ".py" else here / "__init__.py"
    return source.is_file() and re.search(rf"\b{re.escape(parts[0])}\b", source.read_text()) is not None


def comments_and_docstrings(source: str) -> Iterator[tuple[int, str]]:
    """``(line, text)`` of every comment and every module, class and function docstring of ``source``."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            docstring = ast.get_docstring(node, clean=False)
            if docstring:
                yield node.body[0].lineno, docstring
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string


def missing_in_python(source: str) -> list[str]:
    """What the comments and docstrings of ``source`` name that is not in the repository."""
    missing = []
    for line, text in comments_and_docstrings(source):
        missing += [
            f"line {line}: {m.group(1)}" for m in COMMENT_PATH.finditer(text) if "..." not in m.group(1) and not _exists(m.group(1).split("::")[0])
        ]
        missing += [f"line {line}: {m.group(1)}" for m in MODULE.finditer(text) if not _module_exists(m.group(1))]
        missing += [f"line {line}: {m.group(0)} (outside the repository)" for m in OUTSIDE.finditer(text)]
    return missing


def _python_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "*.py"], cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout
    return sorted(listed.split())


def test_named_paths_reads_paths_and_drops_node_ids():
    assert named_paths("see `infra/a.py`, `tests/b.py::test_c` and `infra/*.py`") == ["infra/a.py", "tests/b.py"]


def test_a_comment_naming_a_gone_module_or_path_is_found():
    source = '"""Kept in longstep/approvals.py, tested in tests/unit/test_doc_paths.py."""\n# see infra/gone.py and longstep.humans.table\nx = 1  # longstep.nowhere\n'
    assert missing_in_python(source) == ["line 1: longstep/approvals.py", "line 2: infra/gone.py", "line 3: longstep.nowhere"]
    assert missing_in_python("# the design notes (DESIGN.md §3); a secret longstep/anthropic; longstep.max_turns\n") == [
        "line 1: DESIGN.md (outside the repository)"
    ]


@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: doc.relative_to(REPO_ROOT).as_posix())
def test_every_path_a_doc_names_exists(doc):
    text = doc.read_text()
    missing = sorted({path for path in named_paths(text) if not (REPO_ROOT / path).exists() and not (PROJECT_TEMPLATE / path).exists()})
    assert missing == [], f"{doc.relative_to(REPO_ROOT)} names paths that do not exist"
    assert not OUTSIDE.search(text), f"{doc.relative_to(REPO_ROOT)} cites DESIGN.md: cite docs/design.md"


def test_every_path_and_module_a_comment_or_docstring_names_exists():
    missing = {path: found for path in _python_files() if (found := missing_in_python((REPO_ROOT / path).read_text()))}
    assert missing == {}, "comments or docstrings name what is not in the repository"
