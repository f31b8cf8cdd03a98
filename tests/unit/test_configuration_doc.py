"""docs/configuration.md against the settings model: every key ``cdk.json`` may set has its row, with
the model's default; the deployment configuration's defaults are the runtime's (written once, in
``longstep.settings``); and every Lambda environment variable the runtime reads is named there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from longstep import settings
from longstep.subagents import DEFAULT_MAX_CHILDREN, DEFAULT_MAX_DEPTH
from longstep_kit.config import ESCALATION_TIMEOUT_HOURS, DeploymentConfig

REPO_ROOT = Path(__file__).resolve().parents[2]
DOC = REPO_ROOT / "docs" / "configuration.md"
ROW = re.compile(r"^\| `(?P<key>\w+)` \| (?P<default>[^|]*) \|", re.MULTILINE)
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
