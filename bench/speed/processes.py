"""The bench's measurements in processes of their own: ``longstep local run`` of the 200-turn
scenario and of the demo (what ``make demo`` runs after setup), and issue 28's anchor, moto's
engine on stock moto (``bench/speed/anchor.py``)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from bench.speed.run import MAIN_TURNS, ROOT, scenario_document

DEMO = ROOT / "events" / "scenarios" / "triage.json"


def whole_process(emit: Callable[[str], None]) -> dict[str, Any]:
    """``longstep local run`` of the 200-turn scenario as a subprocess, template cached."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"speed-{MAIN_TURNS}.json"
        path.write_text(json.dumps(scenario_document(MAIN_TURNS)))
        out = local_run_process(path, "local run process", emit)
    return {"command": "longstep local run SCENARIO --quiet --report FILE", "turns": MAIN_TURNS, **out}


def demo_process(emit: Callable[[str], None]) -> dict[str, Any]:
    """What ``make demo`` runs after setup: the triage scenario in a fresh process, template cached."""
    return {"command": "longstep local run events/scenarios/triage.json --report FILE", **local_run_process(DEMO, "demo process", emit, quiet=False)}


def local_run_process(path: Path, what: str, emit: Callable[[str], None], quiet: bool = True) -> dict[str, Any]:
    """``longstep local run PATH`` as a subprocess twice (the first fills the template cache):
    wall and CPU (user + system) seconds of each."""
    env = {**os.environ, "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        command = [
            sys.executable,
            "-m",
            "longstep_kit.cli",
            "local",
            "run",
            str(path),
            *(["--quiet"] if quiet else []),
            "--report",
            str(Path(tmp) / "r.json"),
        ]
        runs = []
        for attempt in ("fills the template cache", "measured"):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            wall = time.perf_counter()
            done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
            wall = time.perf_counter() - wall
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if done.returncode != 0:
                raise RuntimeError(f"longstep local run: exit {done.returncode}: {done.stderr[-2000:]}")
            if "enforcement is OFF" in done.stderr:
                raise RuntimeError("longstep local run ran with the enforcement off")
            report = json.loads((Path(tmp) / "r.json").read_text())
            runs.append(
                {
                    "attempt": attempt,
                    "wall_seconds": wall,
                    "cpu_seconds": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
                    "run_wall_seconds": report["wall_seconds"],
                }
            )
            emit(f"{what} ({attempt}): {wall:.2f} s wall, {runs[-1]['cpu_seconds']:.2f} s CPU")
    return {"runs": runs, "measured": runs[-1]}


def stock_anchor(emit: Callable[[str], None]) -> dict[str, Any]:
    """moto's engine on the trivial loop, stock moto, in a fresh process (``bench/speed/anchor.py``)."""
    done = subprocess.run([sys.executable, "-m", "bench.speed.anchor"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"the stock moto anchor: exit {done.returncode}: {done.stderr[-2000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    emit(f"stock moto loop (fresh process): {out['measured']['cpu_seconds']:.2f} s CPU, {out['measured']['wall_seconds']:.2f} s wall")
    return out
