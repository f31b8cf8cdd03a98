"""docs/local-fidelity.md stays true: every test it names exists; turning enforcement off warns."""

from __future__ import annotations

import ast
import logging
import warnings
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "local-fidelity.md"


def _named_tests() -> list[tuple[str, str]]:
    return re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", DOC.read_text())


def test_the_doc_names_tests():
    assert len(_named_tests()) >= 15


def _table(heading: str) -> list[list[str]]:
    """The rows of the table under ``## heading`` (cells stripped; header and rule left out)."""
    section = DOC.read_text().split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]


def test_every_enforced_row_names_its_aws_error_and_a_test():
    rows = _table("Enforced")
    assert len(rows) >= 15
    for what, error, where, test in rows:
        assert error and where, what
        assert re.search(r"`tests/[\w/]+\.py::\w+`", test), f"enforced without a test: {what}"


def test_every_emulated_and_uncovered_row_says_how_or_why():
    for what, how, *_ in _table("Emulated"):
        assert how, what
    for what, why in _table("Not covered"):
        assert len(why) > 20, f"not covered without a reason: {what}"


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


@pytest.mark.parametrize("scenario", ["wait_for_timer.json", "release.json"])  # an agent's run, a workflow's
def test_the_flag_is_the_only_way_off_and_the_cli_prints_the_warning(capsys, caplog, scenario):
    from longstep_kit import cli
    from longstep_kit.local.fidelity import NOT_ENFORCED_WARNING
    from longstep_kit.local.stack import LocalStack

    from tests.local.conftest import SCENARIOS

    assert LocalStack().enforce  # on unless asked
    run = cli.parser().parse_args(["local", "run", "x.json"])
    assert not run.no_enforce
    with caplog.at_level(logging.WARNING), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = cli.main(["local", "run", str(SCENARIOS / scenario), "--no-enforce", "--quiet"])
    assert code == 0
    # Said once, as one line on stderr: not again as a Python warning or a log line.
    assert capsys.readouterr().err.count(NOT_ENFORCED_WARNING) == 1
    assert not [w for w in caught if NOT_ENFORCED_WARNING in str(w.message)]
    assert NOT_ENFORCED_WARNING not in caplog.text
