"""``pip wheel .`` builds one wheel from the design card's folders (``setup.py``), holding the runtime
(``layers/runtime/``), the entry points (``functions/``) and the kit (``infra/``), and the kit
installed from that wheel alone writes a project with ``longstep init``."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_pip_wheel_builds_one_wheel_that_holds_all_three_and_runs_init(tmp_path):
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet", "-w", str(tmp_path / "dist"), str(REPO_ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("longstep-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    tops = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert tops == {"longstep", "longstep_functions", "longstep_kit"}
    assert {"longstep/store.py", "longstep/requirements.txt", "longstep_functions/model_turn.py", "longstep_kit/cli/__init__.py"} <= names
    assert "longstep_kit/templates/project/functions/invoice.py" in names and "longstep_kit/prices.json" in names
    # The kit from the unpacked wheel only (ahead of this checkout's editable install) writes a project.
    unpacked = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(unpacked)
    code = "import sys, longstep_kit; from longstep_kit.cli import main; print(longstep_kit.__file__); sys.exit(main(['init', sys.argv[1]]))"
    env = {**os.environ, "PYTHONPATH": str(unpacked)}
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "proj")], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[0].startswith(str(unpacked))
    project = tmp_path / "proj"
    assert {"cdk.json", "app.py", "functions", "events", "tests"} <= {p.name for p in project.iterdir()}
    assert '"invoice": "functions.invoice:build"' in (project / "cdk.json").read_text()
