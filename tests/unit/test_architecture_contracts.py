"""The architecture's contracts (``.importlinter``, run by ``make test``) hold on the code and fail on a back edge.

Each broken case runs ``lint-imports`` with the repository's own configuration on a copy of the three
packages, one import added, so the test proves the contracts catch what they promise to catch.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIG = REPO_ROOT / ".importlinter"
# Each package and the folder it is built from (setup.py's PACKAGE_DIRS).
FOLDERS = {"longstep": REPO_ROOT / "layers" / "runtime", "longstep_functions": REPO_ROOT / "functions", "longstep_kit": REPO_ROOT / "infra"}
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _copy(tmp_path: Path) -> Path:
    for package, folder in FOLDERS.items():
        shutil.copytree(folder, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__", "templates"))
    return tmp_path


def _lint(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([str(LINT_IMPORTS), "--config", str(CONFIG), "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=120)


def _add_import(root: Path, module: str, line: str) -> None:
    path = root / (module.replace(".", "/") + ".py")
    path.write_text(path.read_text() + f"\n{line}\n")


def test_the_code_keeps_every_contract(tmp_path):
    done = _lint(_copy(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:]
    assert "0 broken" in done.stdout


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        # the runtime (the Lambda layer) must never import the kit: the layer does not ship it
        ("longstep.store", "import longstep_kit.config", "longstep is not allowed to import longstep_kit"),
        # nor the entry points
        ("longstep.steps", "import longstep_functions.model_turn", "longstep is not allowed to import longstep_functions"),
        # the kit locates the entry points' folder, it never imports them
        ("longstep_kit.bundling", "import longstep_functions.finish", "longstep_kit is not allowed to import longstep_functions"),
        # a back edge: the approvals table imports the module that imports it, if only for typing
        ("longstep.humans.table", "from longstep.humans.decisions import decide", "No cycles are allowed in longstep.humans"),
        ("longstep_kit.local.session", "from longstep_kit.local.runner import run_scenario", "No cycles are allowed in longstep_kit.local"),
    ],
)
def test_a_back_edge_breaks_a_contract(tmp_path, module, line, broken):
    root = _copy(tmp_path)
    _add_import(root, module, line)
    done = _lint(root)
    assert done.returncode == 1, done.stdout[-3000:]
    assert broken in " ".join(done.stdout.split()), done.stdout[-3000:]
