"""Synthesize the CDK app once per process into a cloud assembly directory."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from longstep_kit.project import cdk_context, find_project


_lock = threading.Lock()
_cache: dict[tuple[str, str], "Assembly"] = {}


@dataclass(frozen=True)
class Assembly:
    """A synthesized stack: its template and the directories of its file assets.

    Attributes:
        stack_name: the stack's name.
        template: the CloudFormation template (parsed).
        outdir: the cloud assembly directory.
        assets: asset hash -> asset directory (as staged by synth).
        project: the project directory the app came from.
    """

    stack_name: str
    template: dict[str, Any]
    outdir: Path
    assets: dict[str, Path]
    project: Path


def synthesize(context: dict[str, Any] | None = None, outdir: Path | None = None, project: Path | None = None) -> Assembly:
    """Synthesize the project's app, reusing an earlier synth of the same inputs.

    The assembly is cached per process, and on disk under ``<project>/.longstep/synth/<digest>``
    where the digest covers everything synth reads: ``app.py``, ``cdk.json`` and the context
    overrides, the agents' code, the installed Longstep (runtime and kit) and the CDK's version.
    A second ``longstep local run`` of an unchanged project therefore skips synth.

    Args:
        context: context overrides on top of ``cdk.json``'s.
        outdir: synthesize into this directory, bypassing the disk cache.
        project: the project directory (default: :func:`find_project` from the working directory).
    """
    project = find_project(project)
    overrides = context or {}
    defaults = cdk_context(project)
    merged = {**defaults, **overrides, "longstep": {**defaults.get("longstep", {}), **overrides.get("longstep", {})}}
    key = (str(project), json.dumps(merged, sort_keys=True), str(outdir))
    with _lock:
        if key in _cache:
            return _cache[key]
        if outdir is not None:
            assembly = _synth(project, merged, outdir)
        else:
            cached = project / CACHE_DIR / inputs_digest(project, merged)
            if not (cached / COMPLETE).exists():
                staging = cached.with_name(f"{cached.name}.{os.getpid()}.tmp")
                shutil.rmtree(staging, ignore_errors=True)
                _synth(project, merged, staging)
                (staging / COMPLETE).write_text(cached.name)
                try:
                    staging.rename(cached)
                except OSError:  # another process cached the same inputs first
                    shutil.rmtree(staging, ignore_errors=True)
                _prune(cached.parent, keep=KEEP_CACHED)
            os.utime(cached)  # in use: a concurrent process's prune keeps it
            assembly = _load(project, cached)
        _cache[key] = assembly
        return assembly


CACHE_DIR = Path(".longstep") / "synth"
COMPLETE = ".complete"
KEEP_CACHED = 16
# An assembly is removed only when it is past the KEEP_CACHED most recently used ones AND unused
# for this long: a local stack runs its functions' code from its assembly's asset directories, so
# removing one that another process (a test worker, a `local run`) has loaded breaks that stack.
IDLE_BEFORE_PRUNE_SECONDS = 24 * 3600


def inputs_digest(project: Path, merged_context: dict[str, Any]) -> str:
    """A digest of everything the synth of ``project`` with ``merged_context`` reads."""
    import importlib.metadata

    import longstep
    import longstep_kit
    from longstep_kit.bundling import agent_roots

    h = hashlib.sha256(json.dumps(merged_context, sort_keys=True).encode())
    h.update(importlib.metadata.version("aws-cdk-lib").encode())
    roots = [project / "app.py", project / "cdk.json", Path(longstep.__file__).parent, Path(longstep_kit.__file__).parent]
    for name in agent_roots(merged_context.get("longstep", {}).get("agents", {}).values()):
        roots += [project / name, project / f"{name}.py"]
    for root in roots:
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else []
        for path in files:
            if "__pycache__" in path.parts or path.suffix == ".pyc":
                continue
            h.update(str(path).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:20]


def _synth(project: Path, merged: dict[str, Any], outdir: Path) -> Assembly:
    quiet_node_banner()
    cdk_app = load_app_module(project)
    cdk_app.build_app(context=merged, outdir=str(outdir)).synth()
    return _load(project, outdir)


def _load(project: Path, outdir: Path) -> Assembly:
    """The assembly a synth left in ``outdir`` (its one stack, its template and file assets)."""
    manifest = json.loads((outdir / "manifest.json").read_text())
    (stack_name,) = [name for name, art in manifest["artifacts"].items() if art["type"] == "aws:cloudformation:stack"]
    template = json.loads((outdir / f"{stack_name}.template.json").read_text())
    assets_manifest = json.loads((outdir / f"{stack_name}.assets.json").read_text())
    assets = {
        h: outdir / entry["source"]["path"] for h, entry in assets_manifest.get("files", {}).items() if entry["source"].get("packaging") == "zip"
    }
    return Assembly(stack_name, template, outdir, assets, project)


def _prune(cache: Path, keep: int, idle_seconds: float = IDLE_BEFORE_PRUNE_SECONDS) -> None:
    """Remove cached assemblies past the ``keep`` most recently used that no one used for ``idle_seconds``."""
    done = sorted((d for d in cache.iterdir() if (d / COMPLETE).exists()), key=lambda d: d.stat().st_mtime, reverse=True)
    now = time.time()
    for old in done[keep:]:
        if now - old.stat().st_mtime > idle_seconds:
            shutil.rmtree(old, ignore_errors=True)


def quiet_node_banner() -> None:
    """Silence jsii's Node.js version banners (the CDK runs fine on Node.js 20)."""
    os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "18,20")


def load_app_module(project: Path | None = None) -> Any:
    """Import a project's ``app.py`` by path (it is a script, not an installed module)."""
    import importlib.util

    project = find_project(project)
    spec = importlib.util.spec_from_file_location("longstep_cdk_app", project / "app.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
