"""LangGraph's checkpointer conformance suite against ``longstep.langgraph.LongstepSaver`` on moto.

Two copies of the suite are run: the release installed from PyPI with the dev extra
(``langgraph-checkpoint-conformance``), and, when it is there, the newer copy in
``../shared/conformance/langgraph-checkpoint-conformance`` (its SOURCE.txt names the commit; it
adds the ``delta_channel_history`` capability). The copy runs in a child process whose
``PYTHONPATH`` puts it first, so ``langgraph.checkpoint.conformance`` is that copy's.

    .venv/bin/python -m bench.langgraph.conformance            # both; exit 1 unless every capability passes
    .venv/bin/python -m bench.langgraph.conformance --suite installed

Each capability gets a fresh saver on a fresh table and bucket (``validate()`` makes one per
capability), all in one moto account for the run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
from itertools import count
from pathlib import Path
from typing import Any, AsyncIterator

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_COPY = REPO_ROOT.parent / "shared" / "conformance" / "langgraph-checkpoint-conformance"
REGION = "us-east-1"
REPORT_MARK = "conformance-report: "


def _aws_environment() -> None:
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": REGION}.items():
        os.environ[name] = value
    os.environ.pop("AWS_PROFILE", None)
    os.environ["LANGSMITH_TRACING"] = "false"


def registered_saver() -> Any:
    """The suite's registration of ``LongstepSaver``: moto for the whole run (its lifespan), a new
    table and bucket for each saver it asks for."""
    import boto3
    from langgraph.checkpoint.conformance import checkpointer_test
    from moto import mock_aws

    from longstep.langgraph import LongstepSaver

    numbers = count(1)

    async def lifespan() -> AsyncIterator[None]:
        _aws_environment()
        with mock_aws():
            yield

    @checkpointer_test(name="LongstepSaver", lifespan=lifespan)
    async def longstep_saver() -> AsyncIterator[LongstepSaver]:
        n = next(numbers)
        dynamodb, s3 = boto3.client("dynamodb", region_name=REGION), boto3.client("s3", region_name=REGION)
        LongstepSaver.create_table(dynamodb, f"langgraph-{n}")
        s3.create_bucket(Bucket=f"langgraph-{n}")
        # A small offload threshold, so the suite's values exercise S3 as well as DynamoDB.
        yield LongstepSaver(f"langgraph-{n}", dynamodb=dynamodb, bucket=f"langgraph-{n}", s3=s3, offload_bytes=16)

    return longstep_saver


def run_installed(verbose: bool = False) -> dict[str, Any]:
    """Run the importable suite (``validate()``), print its report; its ``to_dict()`` with the
    suite's location and which capabilities the installed suite knows."""
    from langgraph.checkpoint import conformance
    from langgraph.checkpoint.conformance import validate
    from langgraph.checkpoint.conformance.capabilities import Capability
    from langgraph.checkpoint.conformance.report import ProgressCallbacks

    progress = ProgressCallbacks.verbose() if verbose else ProgressCallbacks.default()
    report = asyncio.run(validate(registered_saver(), progress=progress))
    report.print_report()
    result = report.to_dict()
    result["suite"] = str(Path(conformance.__file__).parent)
    result["capabilities"] = [c.value for c in Capability]
    result["passed_all_base"] = report.passed_all_base()
    result["passed_all"] = report.passed_all()
    return result


def run_shared(verbose: bool = False) -> dict[str, Any] | None:
    """Run the copy in ``../shared`` in a child process (None when there is no copy)."""
    if not (SHARED_COPY / "langgraph" / "checkpoint" / "conformance").is_dir():
        return None
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SHARED_COPY), str(REPO_ROOT)]))
    argv = [sys.executable, "-m", "bench.langgraph.conformance", "--suite", "installed", "--emit"] + (["--verbose"] if verbose else [])
    done = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    lines = done.stdout.splitlines()
    print("\n".join(line for line in lines if not line.startswith(REPORT_MARK)))
    marked = [line for line in lines if line.startswith(REPORT_MARK)]
    if not marked:
        raise RuntimeError(f"the shared copy's run printed no report (exit {done.returncode}):\n{done.stderr[-3000:]}")
    result = json.loads(marked[-1][len(REPORT_MARK) :])
    result["source"] = (SHARED_COPY / "SOURCE.txt").read_text().strip() if (SHARED_COPY / "SOURCE.txt").exists() else None
    return result


def counts(result: dict[str, Any]) -> tuple[int, int, list[str]]:
    """Tests passed and failed in a report, and the capabilities it did not run (not detected)."""
    passed = sum(r["tests_passed"] for r in result["results"].values())
    failed = sum(r["tests_failed"] for r in result["results"].values())
    skipped = sorted(name for name, r in result["results"].items() if not r["detected"])
    return passed, failed, skipped


def main(argv: list[str] | None = None) -> int:
    """Run the suites, print their reports and one line each; exit 1 unless every capability of each passed."""
    parser = argparse.ArgumentParser(prog="python -m bench.langgraph.conformance", description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", choices=["installed", "shared", "both"], default="both")
    parser.add_argument("--verbose", action="store_true", help="each test's name, and a failure's traceback")
    parser.add_argument("--emit", action="store_true", help=argparse.SUPPRESS)  # the child process's report, as JSON
    args = parser.parse_args(argv)
    _aws_environment()
    results: dict[str, dict[str, Any] | None] = {}
    if args.suite in ("installed", "both"):
        results["installed (PyPI)"] = run_installed(args.verbose)
        if args.emit:
            print(REPORT_MARK + json.dumps(results["installed (PyPI)"]))
            return 0
    if args.suite in ("shared", "both"):
        results["../shared copy"] = run_shared(args.verbose)
    ok = True
    for label, result in results.items():
        if result is None:
            print(f"{label}: not present (../shared/conformance/langgraph-checkpoint-conformance), not run")
            continue
        passed, failed, skipped = counts(result)
        ok = ok and result["passed_all"] and result["passed_all_base"]
        not_run = f"; not implemented: {', '.join(skipped)}" if skipped else ""
        print(f"{label}: {result['conformance_level']}, {passed} passed, {failed} failed{not_run} (suite: {result['suite']})")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
