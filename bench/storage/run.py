"""Run the storage benchmark: every system on every session length, each in its own process.

    .venv/bin/python -m bench.storage                 # what `make bench-storage` runs
    .venv/bin/python -m bench.storage --turns 200     # quicker: the 200-turn session only

Writes ``bench/results/storage.json`` and the storage section of ``bench/RESULTS.md`` (between its
markers; other benchmarks' sections are left as they are). Each (system, length) job gets a
fresh process and its own moto account, so jobs share nothing and can run side by side.

The Longstep runtime measured is a copy of ``layers/runtime`` taken when the run
starts (``--runtime worktree``, the default) or at a git revision (``--runtime HEAD``), so edits
made while the benchmark runs cannot mix two versions in one result.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from importlib import metadata
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from bench.storage.session import DEFAULT_SEED, simulate
from bench.storage.systems import SYSTEMS

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "storage.json"
REPORT = ROOT / "bench" / "RESULTS.md"
RUNTIME_DIR = "layers/runtime"
RUNTIME_PATH_ENV = "BENCH_STORAGE_LONGSTEP_PATH"
COMMAND = "make bench-storage"
DIRECT_COMMAND = ".venv/bin/python -m bench.storage"
PACKAGES = (
    "langgraph",
    "langgraph-checkpoint",
    "langgraph-checkpoint-aws",
    "langchain-core",
    "moto",
    "boto3",
    "botocore",
    "aws-lambda-powertools",
    "pydantic",
)


def run_job(system: str, turns: int, seed: int) -> dict[str, Any]:
    """One system on one session length, inside a fresh moto mock (runs in a worker process)."""
    if os.environ.get(RUNTIME_PATH_ENV):  # the frozen copy of the runtime comes before the editable install
        sys.path.insert(0, os.environ[RUNTIME_PATH_ENV])
    from bench.storage.aws import Meter, fake_credentials

    fake_credentials()
    from moto import mock_aws

    from bench.storage import fastmoto

    fastmoto.install()

    from bench.storage.systems import runner

    session = simulate(turns, seed)
    started = time.perf_counter()
    try:
        with mock_aws():
            result = runner(system)(session, Meter())
    except Exception:  # report the failure in the results instead of losing the other jobs
        return {"system": system, "turns": turns, "error": traceback.format_exc(), "wall_seconds": round(time.perf_counter() - started, 1)}
    result.update(system=system, turns=turns, wall_seconds=round(time.perf_counter() - started, 1))
    return result


def machine() -> dict[str, Any]:
    facts: dict[str, Any] = {
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": {},
    }
    for name in PACKAGES:
        try:
            facts["packages"][name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            facts["packages"][name] = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                facts["cpu"] = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                facts["memory_gib"] = round(int(line.split()[1]) / 1024 / 1024, 1)
                break
    except OSError:
        pass
    return facts


def _git(*args: str) -> str:
    out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, timeout=60, check=True)
    return out.stdout.decode("utf-8", errors="replace").strip()


def freeze_runtime(revision: str, dest: Path) -> dict[str, Any]:
    """Copy the ``longstep`` package (working tree or a git revision) into ``dest``; describe it."""
    target = dest / "longstep"
    if revision == "worktree":
        shutil.copytree(ROOT / RUNTIME_DIR, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    else:
        data = subprocess.run(["git", "archive", "--format=tar", revision, RUNTIME_DIR], cwd=ROOT, capture_output=True, check=True, timeout=60).stdout
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            tar.extractall(dest / "archive")
        shutil.move(str(dest / "archive" / RUNTIME_DIR), str(target))
    digest = hashlib.sha256()
    for path in sorted(p for p in target.rglob("*.py")):
        digest.update(str(path.relative_to(target)).encode() + b"\0" + path.read_bytes())
    facts: dict[str, Any] = {"source": revision, "sha256": digest.hexdigest()[:16]}
    try:
        facts["commit"] = _git("rev-parse", "--short", "HEAD" if revision == "worktree" else revision)
        if revision == "worktree":
            facts["uncommitted_changes"] = bool(_git("status", "--porcelain", "--", RUNTIME_DIR))
    except (OSError, subprocess.SubprocessError):
        pass
    return facts


def summarize(job: dict[str, Any]) -> dict[str, Any]:
    """The storage.json entry of one job: the headline fields first, then the detail."""
    if "error" in job or "unavailable" in job:
        return {k: v for k, v in job.items() if k not in ("system", "turns")}
    stored = job["stored"]
    entry: dict[str, Any] = {
        "bytes": stored["bytes"],
        "items": stored["items"],
        "resume": {k: job["resume"][k] for k in ("requests", "items_read", "bytes_read")},
    }
    if "context" in job:
        entry["max_context_tokens"] = job["context"]["max_context_tokens"]
        entry["context_budget_tokens"] = job["context"]["budget_tokens"]
    entry.update(
        {
            "dynamodb_bytes": stored["dynamodb_bytes"],
            "dynamodb_items": stored["dynamodb_items"],
            "s3_bytes": stored["s3_bytes"],
            "s3_objects": stored["s3_objects"],
            "largest_dynamodb_item_bytes": stored["largest_dynamodb_item_bytes"],
            "by_table": stored["tables"],
            "by_bucket": stored["buckets"],
            "resume_detail": job["resume"],
            **({"resume_every_turn": job["resume_every_turn"]} if "resume_every_turn" in job else {}),
            "run_requests": job["run_requests"],
            "wall_seconds": job["wall_seconds"],
            **({"context": job["context"]} if "context" in job else {}),
            **({"payload_limit": job["payload_limit"]} if "payload_limit" in job else {}),
            "details": job.get("details", {}),
        }
    )
    return entry


def merged(document: dict[str, Any], others: list[Path]) -> dict[str, Any]:
    """``document`` with the session lengths it lacks taken from the results files ``others`` (each
    named under ``merged`` with its command, runtime and time). A length this run measured is left
    as it is; one an earlier merge added is taken again (``--render-only --merge``)."""
    for path in others:
        other = json.loads(path.read_text())
        earlier = {t for m in document.get("merged", []) for t in m["turns"]}
        turns = [t for t in other["results"] if t not in document["results"] or t in earlier]
        for t in turns:
            document["results"][t] = other["results"][t]
            document["sessions"][t] = other["sessions"][t]
        name = str(path.resolve().relative_to(ROOT)) if path.resolve().is_relative_to(ROOT) else str(path)
        entry = {
            "file": name,
            "turns": turns,
            "direct_command": other["direct_command"],
            "runtime": other["runtime"],
            "wall_seconds": other["wall_seconds"],
        }
        document["merged"] = [m for m in document.get("merged", []) if m["file"] != name] + [entry]
    return document


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.storage", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, nargs="+", default=[200, 1000], help="session lengths (default: 200 1000)")
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="jobs run side by side (default: min(2, nproc))")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--report", type=Path, default=REPORT)
    parser.add_argument("--runtime", default="worktree", help="the Longstep runtime to measure: worktree (default) or a git revision")
    parser.add_argument("--render-only", action="store_true", help="re-check the goals and rewrite the report from the results file, without running")
    parser.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        default=[],
        help="results files of other session lengths (the 1,000-turn Longstep run, made alone: it does not fit beside every system's) added to the document before the goals are checked",
    )
    args = parser.parse_args(argv)

    from bench.storage.goals import evaluate
    from bench.storage.report import render, write_section

    if args.render_only:
        document = merged(json.loads(args.results.read_text()), args.merge)
        document["goals"] = evaluate(document)
        args.results.write_text(json.dumps(document, indent=2) + "\n")
        write_section(args.report, render(document))
        return 0

    started = time.perf_counter()
    # Longest jobs first so the two workers finish together.
    cost = {"longstep": 4, "langgraph": 3, "full_snapshot": 2, "langgraph_delta": 1}
    jobs = sorted(((s, t) for t in args.turns for s in args.systems), key=lambda j: (-j[1], -cost[j[0]]))
    results: dict[str, dict[str, Any]] = {str(t): {} for t in args.turns}
    frozen = Path(tempfile.mkdtemp(prefix="bench-storage-runtime-"))
    runtime = freeze_runtime(args.runtime, frozen)
    os.environ[RUNTIME_PATH_ENV] = str(frozen)
    print(f"measuring the Longstep runtime of {runtime['source']} (commit {runtime.get('commit', '?')}, sources {runtime['sha256']})", flush=True)
    ctx = get_context("spawn")
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=ctx, max_tasks_per_child=1) as pool:
        futures = {pool.submit(run_job, s, t, args.seed): (s, t) for s, t in jobs}
        for future in as_completed(futures):
            system, turns = futures[future]
            job = future.result()
            status = "ERROR" if "error" in job else ("unavailable" if "unavailable" in job else f"{job['stored']['bytes'] / 1e6:,.1f} MB")
            print(f"[{time.perf_counter() - started:6.1f}s] {system:16s} {turns:5d} turns: {status} ({job['wall_seconds']}s)", flush=True)
            if "error" in job:
                print(job["error"], file=sys.stderr, flush=True)
            results[str(turns)][system] = summarize(job)
    wall = round(time.perf_counter() - started, 1)
    shutil.rmtree(frozen, ignore_errors=True)

    sessions = {}
    for t in args.turns:
        s = simulate(t, args.seed)
        sessions[str(t)] = s.stats
    document: dict[str, Any] = {
        "benchmark": "storage",
        "command": COMMAND,
        "direct_command": DIRECT_COMMAND
        + ("" if args.turns == [200, 1000] else " --turns " + " ".join(map(str, args.turns)))
        + ("" if args.systems == list(SYSTEMS) else " --systems " + " ".join(args.systems))
        + ("" if args.results == RESULTS else f" --results {args.results}")
        + "".join(f" --merge {p}" for p in args.merge)
        + ("" if args.runtime == "worktree" else f" --runtime {args.runtime}"),
        "seed": args.seed,
        "wall_seconds": wall,
        "jobs": args.jobs,
        "machine": machine(),
        "runtime": runtime,
        "sessions": sessions,
        "results": {t: {s: results[t][s] for s in SYSTEMS if s in results[t]} for t in results},
    }
    document = merged(document, args.merge)
    document["goals"] = evaluate(document)
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(document, indent=2) + "\n")
    write_section(args.report, render(document))
    print(
        f"wrote {args.results.relative_to(ROOT) if args.results.is_relative_to(ROOT) else args.results} and "
        f"{args.report.relative_to(ROOT) if args.report.is_relative_to(ROOT) else args.report} in {wall}s"
    )
    failed = [f"{s}@{t}" for t in results for s, r in results[t].items() if "error" in r]
    return 1 if failed else 0
