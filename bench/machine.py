"""The machine a bench ran on: CPU, memory, Python, package versions, commit (for the results files).

Shared by the waits and speed benches, whose results files record the same facts.
"""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def machine_facts() -> dict[str, Any]:
    """CPU model, memory, nproc, load, Python and platform, the versions of moto, boto3, CDK and
    Powertools, and the git commit (with whether the tree has uncommitted changes)."""
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split("MemTotal:")[1].split()[0])
        mem = f"{kb / 1024**2:.1f} GiB"
    except (OSError, IndexError, ValueError):
        pass
    versions = {}
    for dist in ("moto", "boto3", "botocore", "aws-cdk-lib", "aws-lambda-powertools"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    return {
        "nproc": os.cpu_count(),
        "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
        "cpu": cpu,
        "memory": mem,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": versions,
        "commit": git("rev-parse", "--short", "HEAD"),
        "uncommitted_changes": bool(git("status", "--porcelain", "--untracked-files=no")),
    }
