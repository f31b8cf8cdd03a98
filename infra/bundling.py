"""Builds the runtime layer's directory without Docker, cached by content hash.

The third-party wheels are fetched with pip for the Lambda platform (``--platform``,
``--only-binary=:all:``) once per requirements hash; the runtime source is copied on top.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

LAMBDA_PYTHON_VERSION = "3.12"
LAMBDA_PLATFORM = "manylinux2014_x86_64"

REPO_ROOT = Path(__file__).resolve().parent.parent
LAYER_SOURCE = REPO_ROOT / "layers" / "runtime"
DEFAULT_CACHE = REPO_ROOT / ".longstep" / "layer-cache"


class BundlingError(RuntimeError):
    """The layer's dependencies could not be installed."""


def _digest(root: Path, paths: list[Path], extra: str) -> str:
    h = hashlib.sha256(extra.encode())
    for path in sorted(paths):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _source_files(src: Path) -> list[Path]:
    return [p for p in src.rglob("*.py") if "__pycache__" not in p.parts]


def dependencies_dir(cache: Path = DEFAULT_CACHE, layer_source: Path = LAYER_SOURCE) -> Path:
    """The installed third-party packages for the layer, built on first use."""
    requirements = layer_source / "requirements.txt"
    key = _digest(layer_source, [requirements], f"{LAMBDA_PLATFORM}-{LAMBDA_PYTHON_VERSION}")
    target = cache / f"deps-{key}"
    if (target / ".complete").exists():
        return target
    staging = cache / f"deps-{key}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    cmd = [
        sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
        "--target", str(staging), "--platform", LAMBDA_PLATFORM, "--implementation", "cp",
        "--python-version", LAMBDA_PYTHON_VERSION, "--only-binary=:all:", "-r", str(requirements),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise BundlingError(f"pip could not install the layer's requirements:\n{done.stderr[-2000:]}")
    for junk in staging.rglob("__pycache__"):
        shutil.rmtree(junk, ignore_errors=True)
    (staging / ".complete").write_text(key)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target


def build_layer(cache: Path = DEFAULT_CACHE, layer_source: Path = LAYER_SOURCE) -> Path:
    """A directory whose ``python/`` holds the dependencies and the ``longstep`` package."""
    deps = dependencies_dir(cache, layer_source)
    src = layer_source / "src" / "longstep"
    key = _digest(layer_source, _source_files(src) + [layer_source / "requirements.txt"], deps.name)
    out = cache / f"layer-{key}"
    if (out / ".complete").exists():
        return out
    staging = cache / f"layer-{key}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(deps, staging / "python", ignore=shutil.ignore_patterns(".complete"))
    shutil.copytree(src, staging / "python" / "longstep", ignore=shutil.ignore_patterns("__pycache__"))
    (staging / ".complete").write_text(key)
    shutil.rmtree(out, ignore_errors=True)
    staging.rename(out)
    return out


if __name__ == "__main__":
    print(build_layer())
