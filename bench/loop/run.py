"""Run the loop benchmark (``make bench-loop``): see the package docstring."""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.loop.report import render
from bench.machine import machine_facts
from bench.sections import write_section

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "loop.json"
REPORT = ROOT / "bench" / "RESULTS.md"
SCENARIO = "events/scenarios/triage.json"
# One line of a tool's code (send_email's result), and one declaration (the condition's name).
CODE_EDIT = ('return {"sent": True, "to": to, "subject": subject}', 'return {"sent": True, "to": to, "subject": subject, "edited": 1}')
DECLARATION_EDIT = ('conditions={"ticket_status":', 'conditions={"ticket_state":')
STEP_TIMEOUT_SECONDS = 3600


def timed(argv: list[str] | str, cwd: Path, env: dict[str, str], log: Path) -> dict[str, Any]:
    """Run one step; its wall and CPU seconds (its processes'), its exit code and the load when it began."""
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    with log.open("a") as out:
        out.write(f"\n$ {argv if isinstance(argv, str) else ' '.join(argv)}   (in {cwd})\n")
        out.flush()
        done = subprocess.run(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, shell=isinstance(argv, str), timeout=STEP_TIMEOUT_SECONDS)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_seconds": round(wall, 1), "cpu_seconds": round(cpu, 1), "exit_code": done.returncode, "load_1m": round(load, 2)}


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    if text.count(old) != 1:
        raise SystemExit(f"bench/loop: {old!r} is not once in {path}: the edit no longer applies")
    path.write_text(text.replace(old, new))


def _served_rerun(clone: Path, longstep: str, env: dict[str, str], log: Path, triage: Path) -> dict[str, Any] | None:
    """The loop ``longstep dev`` prints: a stack served in the clone (its scenario run once, as a
    developer's last run), one line of a tool edited, the scenario run again on the served stack.
    None for a tree whose ``local run`` has no ``--endpoint-url`` (the baseline)."""
    if not (clone / "infra" / "cli" / "served_run_cmd.py").exists():
        return None
    from longstep_kit.local.serve import free_port

    ready, edited = clone / ".bench-ready.json", False
    argv = [
        longstep,
        "local",
        "serve",
        "--scenario",
        SCENARIO,
        "--port",
        str(free_port()),
        "--pages-port",
        str(free_port()),
        "--ready-file",
        str(ready),
    ]
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(argv)} &   (in {clone})\n")
        out.flush()
        proc = subprocess.Popen(argv, cwd=clone, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + STEP_TIMEOUT_SECONDS
        while not ready.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"bench/loop: local serve did not come up (exit {proc.poll()}); see {log}")
            time.sleep(0.2)
        served = json.loads(ready.read_text())
        rerun = [longstep, "local", "run", SCENARIO, "--endpoint-url", served["endpoint_url"], "--token", served["token"], "--quiet"]
        timed(rerun, clone, env, log)  # the developer's run before the edit
        _edit(triage, *CODE_EDIT)
        edited = True
        return timed(rerun, clone, env, log)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        ready.unlink(missing_ok=True)
        if edited:
            _edit(triage, *CODE_EDIT[::-1])


def measure(revision: str, work: Path, caches: dict[str, str], steps: set[str], log: Path) -> dict[str, Any]:
    """Every step on a fresh clone of ``revision`` in ``work``, with ``caches`` in the environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH"))}
    env.update(caches)
    clone = work / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "--quiet", revision], check=True)
    out: dict[str, Any] = {
        "revision": subprocess.run(["git", "-C", str(clone), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    }
    out["demo"] = timed(["make", "demo"], clone, env, log)
    longstep = str(clone / ".venv" / "bin" / "longstep")
    triage = clone / "agents" / "triage.py"
    if "edit" in steps:
        # The shell's rerun with Python's bytecode kept where the Makefile keeps it (what `make demo`
        # compiled), and once more with none kept, as in an environment with PYTHONDONTWRITEBYTECODE set.
        kept = {**env, "PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": str(Path(env["XDG_CACHE_HOME"]) / "longstep" / "pycache")}
        _edit(triage, *CODE_EDIT)
        out["code_edit_rerun"] = timed([longstep, "local", "run", SCENARIO, "--quiet"], clone, kept, log)
        bare = {k: v for k, v in env.items() if k != "PYTHONPYCACHEPREFIX"} | {"PYTHONDONTWRITEBYTECODE": "1"}
        out["code_edit_rerun_no_bytecode"] = timed([longstep, "local", "run", SCENARIO, "--quiet"], clone, bare, log)
        _edit(triage, *CODE_EDIT[::-1])
        served = _served_rerun(clone, longstep, kept, log, triage)
        if served is not None:
            out["code_edit_rerun_served"] = served
        _edit(triage, *DECLARATION_EDIT)
        out["declaration_edit_rerun"] = timed([longstep, "local", "run", SCENARIO, "--quiet"], clone, kept, log)
        subprocess.run(["git", "-C", str(clone), "checkout", "--quiet", "--", "agents"], check=True)
    if "init" in steps:
        project = work / "my-agents"
        out["init"] = timed([longstep, "init", str(project)], work, env, log)
        out["init_demo"] = timed(["make", "demo"], project, env, log)
        out["init_test"] = timed(["make", "test"], project, env, log)
    if "fast" in steps:
        # The baseline had no test-fast target: the same tests, as its Makefile would run them.
        has_target = "\ntest-fast:" in (clone / "Makefile").read_text()
        fast = ["make", "test-fast"] if has_target else f"{clone}/.venv/bin/pytest -q -n 2 tests/unit tests/functional"
        out["test_fast"] = timed(fast, clone, env, log)
    if "suite" in steps:
        out["test"] = timed(["make", "test"], clone, env, log)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.loop", description=__doc__)
    parser.add_argument("--baseline", default="300ca6f", help="the revision to compare with (default: the last one before issue 34)")
    parser.add_argument("--cold", action="store_true", help="also this tree's make demo with every package cache empty (downloads ~300 MB)")
    parser.add_argument("--suite", action="store_true", help="also make test on both (about 15 minutes more)")
    parser.add_argument("--no-baseline", action="store_true", help="measure this tree only")
    args = parser.parse_args(argv)
    steps = {"edit", "init", "fast"} | ({"suite"} if args.suite else set())
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    # The package managers' caches as they are on this machine (warm); set explicitly, as the
    # runs below move XDG_CACHE_HOME (Longstep's own cache), where uv and pip would look otherwise.
    warm = {
        "UV_CACHE_DIR": os.environ.get("UV_CACHE_DIR") or str(Path.home() / ".cache" / "uv"),
        "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR") or str(Path.home() / ".cache" / "pip"),
    }
    results: dict[str, Any] = {"machine": machine_facts(), "steps": sorted(steps)}
    with tempfile.TemporaryDirectory(prefix="bench-loop-") as tmp:
        log = Path(tmp) / "log.txt"
        runs = [("this", head, warm)]
        if not args.no_baseline:
            runs.append(("baseline", args.baseline, warm))
        for name, revision, caches in runs:
            work = Path(tmp) / name
            work.mkdir()
            # Longstep's own caches (layer packages, synthesized templates) start empty: what a new
            # user has; the package managers' caches are the machine's (warm).
            caches = {**caches, "XDG_CACHE_HOME": str(work / "xdg")}
            print(f"bench/loop: {name} ({revision})...", flush=True)
            results[name] = measure(revision, work, caches, steps, log)
        if args.cold:
            work = Path(tmp) / "cold"
            work.mkdir()
            empty = {"UV_CACHE_DIR": str(work / "uv"), "XDG_CACHE_HOME": str(work / "xdg"), "PIP_CACHE_DIR": str(work / "pip")}
            empty["npm_config_cache"] = str(work / "npm")
            print("bench/loop: this tree, every cache empty...", flush=True)
            results["cold"] = measure(head, work, empty, set(), log)
        shutil.copy2(log, RESULTS.with_suffix(".log"))
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    begin, end = "<!-- bench-loop:begin -->", "<!-- bench-loop:end -->"
    write_section(REPORT, render(results, begin, end), begin, end)
    print(f"bench/loop: wrote {RESULTS.relative_to(ROOT)} and its section of {REPORT.relative_to(ROOT)}")
    failed = [
        f"{run}.{step}" for run in ("this", "baseline", "cold") for step, r in results.get(run, {}).items() if isinstance(r, dict) and r["exit_code"]
    ]
    if failed:
        print(f"bench/loop: these steps failed (their output: {RESULTS.with_suffix('.log').relative_to(ROOT)}): {', '.join(failed)}")
    return 1 if failed else 0
