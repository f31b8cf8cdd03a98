"""docs/local-fidelity.md stays true: every test it names exists; turning enforcement off warns."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "local-fidelity.md"


def _named_tests() -> list[tuple[str, str]]:
    return re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", DOC.read_text())


def test_the_doc_names_tests():
    assert len(_named_tests()) >= 15


@pytest.mark.parametrize("path,name", _named_tests())
def test_every_test_the_doc_names_exists(path, name):
    tree = ast.parse((ROOT / path).read_text())
    assert name in {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}, f"{path}::{name}"


def test_turning_enforcement_off_warns():
    from longstep_kit.cli import parser
    from longstep_kit.local.stack import LocalStack

    assert parser().parse_args(["local", "run", "x.json", "--no-enforce"]).no_enforce
    assert not parser().parse_args(["local", "run", "x.json"]).no_enforce  # on unless asked

    with pytest.warns(UserWarning, match="enforcement is OFF"):
        with LocalStack(enforce=False) as stack:
            assert stack.enforcement.policies is None
