"""``longstep init``: the project it writes holds no path back to this checkout, carries the kit as
an installable wheel, and its own tests (runs of its example agent on the local stack, with
crashes resolved by its payment's probe and no duplicate in its ledgers) pass with this Longstep installed."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from longstep_kit.cli import main

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_init_writes_a_project_whose_tests_pass(tmp_path, capsys):
    project = tmp_path / "my-agents"
    assert main(["init", str(project)]) == 0
    capsys.readouterr()
    for path in project.rglob("*"):
        if path.is_file() and path.suffix in (".py", ".json", ".md", ".in", ""):
            assert str(REPO_ROOT) not in path.read_text(errors="ignore"), path
    (wheel,) = (project / "vendor").glob("longstep-*-py3-none-any.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "longstep_functions/model_turn.py" in names and "longstep/store.py" in names and "longstep_kit/templates/project/app.py" in names
    assert any(n.endswith(".dist-info/METADATA") for n in names)
    readme = (project / "README.md").read_text()
    assert "make demo" in readme and "make test" in readme
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # This venv's benchmark extras bring pytest plugins the project does not use (pyproject.toml's addopts).
    env["PYTEST_ADDOPTS"] = "-p no:langsmith_plugin -p no:anyio -p no:typeguard"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=project, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "7 passed" in done.stdout
