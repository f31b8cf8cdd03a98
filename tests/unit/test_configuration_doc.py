"""docs/configuration.md against the settings model: every key ``cdk.json`` may set has its row, with
the model's default; the deployment configuration's defaults are the runtime's (written once, in
``longstep.settings``); and every Lambda environment variable the runtime reads is named there."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from longstep import settings
from longstep.subagents import DEFAULT_MAX_CHILDREN, DEFAULT_MAX_DEPTH
from longstep_kit.config import ESCALATION_TIMEOUT_HOURS, DeploymentConfig

REPO_ROOT = Path(__file__).resolve().parents[2]
DOC = REPO_ROOT / "docs" / "configuration.md"
ROW = re.compile(r"^\| `(?P<key>[a-z_]+)` \| (?P<default>[^|]*) \|", re.MULTILINE)
# A default cell the model can be read against: a number, a boolean, or none.
LITERAL = re.compile(r"^(?:(?P<number>[\d,]+)|(?P<boolean>true|false)|(?P<none>none)(?: \(.*\))?|`(?P<text>[^`]+)`)$")
FIELDS = DeploymentConfig.model_fields

# Each deployment key whose value the functions receive, and the runtime's default it takes.
RUNTIME_DEFAULTS = {
    "model_id": settings.DEFAULT_MODEL_ID,
    "max_turns": settings.DEFAULT_MAX_TURNS,
    "offload_threshold_bytes": settings.DEFAULT_OFFLOAD_THRESHOLD_BYTES,
    "retention_days": settings.DEFAULT_RETENTION_DAYS,
    "approval_timeout_hours": settings.DEFAULT_APPROVAL_TIMEOUT_SECONDS // 3600,
    "context_budget_tokens": settings.DEFAULT_CONTEXT_BUDGET_TOKENS,
    "snapshot_every": settings.DEFAULT_SNAPSHOT_EVERY,
    "keep_recent_turns": settings.DEFAULT_KEEP_RECENT_TURNS,
    "subagent_max_depth": DEFAULT_MAX_DEPTH,
    "subagent_max_children": DEFAULT_MAX_CHILDREN,
    "subagent_timeout_hours": settings.DEFAULT_SUBAGENT_TIMEOUT_SECONDS // 3600,
}


def _rows() -> dict[str, str]:
    return {match["key"]: match["default"].strip() for match in ROW.finditer(DOC.read_text())}


def test_every_key_of_the_configuration_has_its_row():
    rows = _rows()
    assert sorted(set(FIELDS) - set(rows)) == [], "keys cdk.json may set that docs/configuration.md does not document"
    assert sorted(set(rows) - set(FIELDS)) == [], "rows of docs/configuration.md the configuration does not have"
    print(f"docs/configuration.md documents {len(set(rows) & set(FIELDS))} of {len(FIELDS)} settings")


@pytest.mark.parametrize("key", sorted(FIELDS))
def test_a_rows_default_is_the_models(key):
    cell = _rows().get(key, "")
    literal = LITERAL.match(cell)
    default = DeploymentConfig().model_dump()[key]
    if literal is None:
        return  # a default explained in words (computed, or per step kind)
    if literal["number"]:
        assert default == int(literal["number"].replace(",", "")), f"{key}: the doc says {cell}, the model {default!r}"
    elif literal["boolean"]:
        assert default is (literal["boolean"] == "true"), f"{key}: the doc says {cell}, the model {default!r}"
    elif literal["none"]:
        assert default in (None, [], {}), f"{key}: the doc says none, the model {default!r}"
    else:
        assert default == literal["text"], f"{key}: the doc says {cell}, the model {default!r}"


@pytest.mark.parametrize("key", sorted(RUNTIME_DEFAULTS))
def test_the_deployment_default_is_the_runtimes(key):
    assert FIELDS[key].default == RUNTIME_DEFAULTS[key]


def test_escalations_wait_the_runtimes_default():
    assert ESCALATION_TIMEOUT_HOURS * 3600 == settings.DEFAULT_ESCALATION_TIMEOUT_SECONDS


# -- environment variable names: once, in longstep.settings -------------------------------------

VARIABLE = re.compile(r"^(?:LONGSTEP|POWERTOOLS)_[A-Z_]*$|^AWS_LAMBDA_FUNCTION_NAME$")
# Still defined beside the task that reads them: they move into longstep.settings with the tasks'
# renames (issue 35's typed tasks), which own those modules' edits for now.
PENDING: dict[str, set[str]] = {}
# The local stack's own processes (the served stack's token, its Lambda workers) are not functions.
KIT_PROCESSES = REPO_ROOT / "infra" / "local"
SETTINGS_MODULE = REPO_ROOT / "layers" / "runtime" / "settings.py"


def _settings_variables() -> set[str]:
    return {value for name, value in vars(settings).items() if name.isupper() and isinstance(value, str) and VARIABLE.match(value)}


def _literals(path: Path) -> set[str]:
    return {
        node.value
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and VARIABLE.match(node.value)
    }


def test_every_variable_name_is_written_once_in_the_settings_module():
    spelled = {}
    for folder in ("layers/runtime", "functions", "infra"):
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            if path == SETTINGS_MODULE or KIT_PROCESSES in path.parents:
                continue
            relative = path.relative_to(REPO_ROOT).as_posix()
            found = _literals(path) - PENDING.get(relative, set())
            if found:
                spelled[relative] = sorted(found)
    assert spelled == {}, "import these names from longstep.settings"
    assert len(_literals(SETTINGS_MODULE)) == len(_settings_variables())


def test_the_doc_lists_every_variable():
    documented = {name.replace("<NAME>", "") for name in re.findall(r"`((?:LONGSTEP|POWERTOOLS|AWS)_[A-Z_<>]+)`", DOC.read_text())}
    expected = _settings_variables() | set().union(*PENDING.values())
    assert sorted(expected - documented) == [], "variables docs/configuration.md does not list"
    assert sorted(documented - expected) == [], "variables docs/configuration.md lists that the settings do not define"
