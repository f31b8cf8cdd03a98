"""External linters on the synthesized output: cfn-lint on the template, asl-validator on the ASL.

Both tools are project dependencies (cfn-lint in the venv's dev extra, asl-validator in
package.json); a missing tool is a broken setup, so these tests fail rather than skip.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
ASL_VALIDATOR = REPO_ROOT / "node_modules" / ".bin" / "asl-validator"
CFN_LINT = Path(sys.executable).parent / "cfn-lint"

# cfn-lint's exit code is a bit mask: 2 errors, 4 warnings, 8 informational (1 = crash).
CFN_LINT_ERROR_BITS = 2 | 1


def _asl_validator() -> Path:
    if not ASL_VALIDATOR.exists():
        pytest.fail(f"{ASL_VALIDATOR} is missing: run `make setup` to install the node tools")
    return ASL_VALIDATOR


def _validate_asl(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(_asl_validator()), "--json-path", str(path)], capture_output=True, text=True, timeout=60)


def test_cfn_lint_finds_no_errors(template, tmp_path):
    assert CFN_LINT.exists(), f"{CFN_LINT} is missing: run `make setup`"
    path = tmp_path / "template.json"
    path.write_text(json.dumps(template, indent=1))
    done = subprocess.run([str(CFN_LINT), "--format", "json", str(path)], capture_output=True, text=True, timeout=120)
    assert not done.returncode & CFN_LINT_ERROR_BITS, f"cfn-lint exit {done.returncode}:\n{done.stdout}\n{done.stderr}"
    findings = json.loads(done.stdout or "[]")
    errors = [f"{f['Rule']['Id']} {f['Message']}" for f in findings if f["Level"] == "Error"]
    assert errors == []


def test_asl_validator_accepts_every_definition(definitions, tmp_path):
    assert definitions
    for logical_id, definition in definitions.items():
        path = tmp_path / f"{logical_id}.asl.json"
        path.write_text(json.dumps(definition))
        done = _validate_asl(path)
        assert done.returncode == 0, f"{logical_id}:\n{done.stdout}\n{done.stderr}"


def test_asl_validator_rejects_a_broken_definition(definition, tmp_path):
    """The check above can fail: a dangling transition is reported."""
    broken = json.loads(json.dumps(definition))
    broken["States"]["Init"]["Next"] = "NoSuchState"
    path = tmp_path / "broken.asl.json"
    path.write_text(json.dumps(broken))
    done = _validate_asl(path)
    assert done.returncode != 0
    assert "NoSuchState" in done.stdout + done.stderr
