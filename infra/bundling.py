"""Builds the Lambda assets without Docker, cached by content hash.

- The runtime layer: the third-party wheels of the runtime's ``requirements.txt`` are fetched with
  pip for the Lambda platform (``--platform``, ``--only-binary=:all:``) once per requirements
  hash, and the installed ``longstep`` package (the runtime: ``layers/runtime/`` of the kit's
  repository) is copied on top.
- The functions' code: the Lambda entry points (the installed ``longstep_functions`` package,
  ``functions/`` of the kit's repository) and the top-level packages or modules of the project
  that the configured agents live in, copied into one directory that becomes the functions' code
  asset.

Everything is located from the installed package and the project directory the caller names,
never from the working directory.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Iterable

import longstep

LAMBDA_PYTHON_VERSION = "3.12"
LAMBDA_PLATFORM = "manylinux2014_x86_64"
LAMBDA_UV_PLATFORM = "x86_64-manylinux2014"  # the same platform as uv names it

RUNTIME_SOURCE = Path(longstep.__file__).resolve().parent
REQUIREMENTS = RUNTIME_SOURCE / "requirements.txt"
# The entry points are located, never imported: the kit deploys them and the runtime runs them.
FUNCTIONS_PACKAGE = "longstep_functions"
FUNCTIONS_SOURCE = Path(importlib.util.find_spec(FUNCTIONS_PACKAGE).origin).resolve().parent
CACHE_DIR_NAME = ".longstep"


class BundlingError(RuntimeError):
    """An asset could not be built (the message says which and why)."""


def default_cache(project_dir: Path) -> Path:
    """Where a project's built assets are cached: ``<project>/.longstep/layer-cache``."""
    return project_dir / CACHE_DIR_NAME / "layer-cache"


def _digest(root: Path, paths: Iterable[Path], extra: str) -> str:
    h = hashlib.sha256(extra.encode())
    for path in sorted(paths):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _source_files(src: Path) -> list[Path]:
    if src.is_file():
        return [src]
    return [p for p in src.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"]


def _stage(target: Path, fill) -> Path:
    """Build ``target`` through a staging directory of this process, so a half-built one is never
    used and two processes building the same asset (test workers) do not collide."""
    if (target / ".complete").exists():
        return target
    staging = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    fill(staging)
    (staging / ".complete").write_text(target.name)
    try:
        staging.rename(target)
    except OSError:  # another process finished it first (same content: same hash)
        if not (target / ".complete").exists():
            shutil.rmtree(target, ignore_errors=True)
            staging.rename(target)
            return target
        shutil.rmtree(staging, ignore_errors=True)
    return target


def shared_cache() -> Path:
    """Where what every project on this machine builds alike is kept: the layer's third-party
    packages (tens of MB for the Lambda platform), so that a project made by ``longstep init``
    copies them instead of downloading them again. ``$XDG_CACHE_HOME/longstep``, by default
    ``~/.cache/longstep``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "longstep"


def _install_command(staging: Path, requirements: Path) -> list[str]:
    """uv beside this interpreter when there is one (setup installs it: its cache is shared by
    every project), else pip; either installs wheels for the Lambda platform into ``staging``."""
    uv = Path(sys.executable).parent / "uv"
    if uv.is_file():
        return [str(uv), "pip", "install", "--quiet", "--target", str(staging), "--python-platform", LAMBDA_UV_PLATFORM]
    return [
        *(sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--target", str(staging)),
        *("--platform", LAMBDA_PLATFORM, "--implementation", "cp"),
    ]


def dependencies_dir(cache: Path, requirements: Path = REQUIREMENTS) -> Path:
    """The installed third-party packages for the layer, built on first use."""
    key = _digest(requirements.parent, [requirements], f"{LAMBDA_PLATFORM}-{LAMBDA_PYTHON_VERSION}")

    def fill(staging: Path) -> None:
        cmd = [*_install_command(staging, requirements), "--python-version", LAMBDA_PYTHON_VERSION, "--only-binary=:all:", "-r", str(requirements)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise BundlingError(f"{Path(cmd[0]).name} could not install the layer's requirements:\n{done.stderr[-2000:]}")
        for junk in staging.rglob("__pycache__"):
            shutil.rmtree(junk, ignore_errors=True)

    return _stage(cache / f"deps-{key}", fill)


def build_layer(cache: Path, runtime_source: Path = RUNTIME_SOURCE, requirements: Path = REQUIREMENTS, deps_cache: Path | None = None) -> Path:
    """A directory whose ``python/`` holds the dependencies and the ``longstep`` runtime package.

    Args:
        cache: the project's cache (the layer itself: the runtime changes with the kit).
        runtime_source: the ``longstep`` package to copy in.
        requirements: the third-party requirements.
        deps_cache: where the third-party packages are built (default: :func:`shared_cache`).
    """
    deps = dependencies_dir(shared_cache() if deps_cache is None else deps_cache, requirements)
    key = _digest(runtime_source, _source_files(runtime_source), deps.name)

    def fill(staging: Path) -> None:
        shutil.copytree(deps, staging / "python", ignore=shutil.ignore_patterns(".complete"))
        shutil.copytree(runtime_source, staging / "python" / "longstep", ignore=shutil.ignore_patterns("__pycache__", "*.pyc", requirements.name))

    return _stage(cache / f"layer-{key}", fill)


def agent_roots(references: Iterable[str]) -> list[str]:
    """The top-level package or module names that ``module:callable`` references live in."""
    return sorted({ref.partition(":")[0].split(".")[0] for ref in references})


def build_function_code(project_dir: Path, references: Iterable[str], cache: Path, functions_source: Path = FUNCTIONS_SOURCE) -> Path:
    """A directory holding the Lambda entry points and the project's packages (or modules) the agents live in.

    Raises:
        BundlingError: a referenced package or module is not in the project directory.
    """
    sources: list[Path] = []
    for root in agent_roots(references):
        package, module = project_dir / root, project_dir / f"{root}.py"
        if (package / "__init__.py").exists():
            sources.append(package)
        elif module.exists():
            sources.append(module)
        elif package.is_dir():  # a folder of modules, not yet a package: Lambda could not import it
            raise BundlingError(f"agents: {root}/ has no __init__.py: add an empty {root}/__init__.py (the agents' code ships as a Python package)")
        else:
            raise BundlingError(f"agents: no package {root}/ or module {root}.py in {project_dir}")
    files = [f for src in sources for f in _source_files(src)]
    key = _digest(project_dir, files, "agents") + _digest(functions_source, _source_files(functions_source), "functions")[:8]

    def fill(staging: Path) -> None:
        shutil.copytree(functions_source, staging / FUNCTIONS_PACKAGE, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for src in sources:
            if src.is_dir():
                shutil.copytree(src, staging / src.name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                shutil.copy2(src, staging / src.name)

    return _stage(cache / f"functions-{key}", fill)


def zip_asset(directory: Path, asset_hash: str, cache: Path) -> Path:
    """An asset directory zipped as Lambda takes it, cached by asset hash and directory: synth
    hashed the staged content, and the functions' code rebuilt after a code-only edit has a
    directory named by its own content hash (``longstep_kit.local.synth``)."""
    target = cache / f"{asset_hash}.{directory.name}.zip"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for path in sorted(directory.rglob("*")):
            if path.is_file():
                zf.write(path, path.relative_to(directory).as_posix())
    tmp.replace(target)
    return target


if __name__ == "__main__":
    print(build_layer(default_cache(Path.cwd())))
