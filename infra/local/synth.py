"""Synthesize the CDK app once per set of declarations into a cloud assembly directory.

The template depends on the agents' *declarations* (their resources, conditions, MCP secrets and
inline tools: ``longstep_kit.declarations``), the configuration and the kit, never on the bytes of
the agents' code, which only fill the functions' code asset. So the cache is keyed on those, and a
code-only edit reuses the synthesized template: the functions' code asset is rebuilt from the
project (a copy, no Node.js) and put in place of the one synth staged. A synth takes tens of
seconds; a reuse takes a fraction of one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from longstep_kit.project import cdk_context, find_project

_lock = threading.Lock()
_cache: dict[tuple[str, str, str], "Assembly"] = {}

# The digest of the template a project last ran: a synth after it says what changed.
LAST_DIGEST = Path(".longstep") / "last_synth_digest"
COMPLETE = ".complete"
KEEP_CACHED = 16
# An assembly is removed only when it is past the KEEP_CACHED most recently used ones AND unused
# for this long: a local stack runs its functions' code from its assembly's asset directories, so
# removing one that another process (a test worker, a `local run`) has loaded breaks that stack.
IDLE_BEFORE_PRUNE_SECONDS = 24 * 3600
# The project modules other than the agents' that the app imported while it was synthesized
# (stacks of the project's own beside Longstep's): relative path -> sha256, checked on every reuse.
EXTRA_INPUTS = "extra_inputs.json"
# How long the last synth of this project took: the estimate announced before the next one.
LAST_SECONDS = "last_synth_seconds"
FIRST_SYNTH_ESTIMATE_SECONDS = 45


@dataclass(frozen=True)
class Assembly:
    """A synthesized stack: its template and the directories of its file assets.

    Attributes:
        stack_name: the stack's name.
        template: the CloudFormation template (parsed).
        outdir: the cloud assembly directory.
        assets: asset hash -> asset directory (as staged by synth, or the functions' code as it is now).
        project: the project directory the app came from.
        code_asset: the hash of the functions' code asset (the Lambda entry points and the agents),
            the one asset a code-only edit replaces; None if the assembly has none.
    """

    stack_name: str
    template: dict[str, Any]
    outdir: Path
    assets: dict[str, Path]
    project: Path
    code_asset: str | None = None


def synthesize(
    context: dict[str, Any] | None = None,
    outdir: Path | None = None,
    project: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> Assembly:
    """The project's synthesized app, reusing an earlier synth of the same declarations.

    The assembly is cached per process, and on disk under ``<shared cache>/synth/<digest>``
    (:func:`cache_dir`: one cache for every project on the machine) where the digest covers what
    the template depends on (:func:`inputs_digest`). On a reuse the functions' code asset is the
    project's code as it is now.

    Args:
        context: context overrides on top of ``cdk.json``'s.
        outdir: synthesize into this directory, bypassing the disk cache.
        project: the project directory (default: :func:`find_project` from the working directory).
        progress: called with a line before a synth starts (what changed, about how long it takes).
    """
    project = find_project(project)
    merged = merged_context(project, context)
    digest = inputs_digest(project, merged)
    key = (str(project), digest, str(outdir))
    with _lock:
        if key not in _cache:
            if outdir is not None:
                _cache[key] = _synth(project, merged, outdir)
            else:
                _cache[key] = _cached_or_synthesized(project, merged, digest, progress)
        return with_current_code(_cache[key], merged)


def merged_context(project: Path, overrides: dict[str, Any] | None) -> dict[str, Any]:
    """``cdk.json``'s context with ``overrides`` on top (the ``longstep`` key merged a level deeper)."""
    overrides = overrides or {}
    defaults = cdk_context(project)
    return {**defaults, **overrides, "longstep": {**defaults.get("longstep", {}), **overrides.get("longstep", {})}}


def inputs_digest(project: Path, merged_context: dict[str, Any]) -> str:
    """A digest of what the template of ``project`` with ``merged_context`` depends on.

    That is the context, the CDK's version, ``app.py`` and ``cdk.json``, the installed Longstep (the
    kit and the runtime: constructs, error names, settings) and the agents' and workflows'
    declarations, read by importing them (``longstep_kit.declarations``). Not the agents' code:
    :func:`with_current_code` brings it. Paths are hashed relative to their root, so a copied
    project shares its cache.

    Raises:
        ConfigError: an agent's or workflow's declarations are invalid (what synth would say).
    """
    import importlib.metadata

    import longstep
    import longstep_kit

    h = hashlib.sha256(json.dumps(merged_context, sort_keys=True).encode())
    h.update(importlib.metadata.version("aws-cdk-lib").encode())
    for root in (project / "app.py", project / "cdk.json", Path(longstep.__file__).parent, Path(longstep_kit.__file__).parent):
        _hash_tree(h, root)
    h.update(_declarations_manifest(project, merged_context).encode())
    return h.hexdigest()[:20]


def _hash_tree(h: Any, root: Path) -> None:
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else []
    for path in files:
        if "__pycache__" in path.parts or path.suffix == ".pyc":
            continue
        h.update(str(path.relative_to(root.parent)).encode())
        h.update(path.read_bytes())


def _declarations_manifest(project: Path, merged_context: dict[str, Any]) -> str:
    from longstep_kit.config import ConfigError, load_config
    from longstep_kit.declarations import read_declarations

    try:
        config = load_config(merged_context.get("longstep"))
    except ConfigError:
        return "invalid configuration"  # synth says what is wrong, in one line
    if not config.agents:
        return "no agents"
    return read_declarations(project, config, warn=False).manifest()


def with_current_code(assembly: Assembly, merged_context: dict[str, Any]) -> Assembly:
    """``assembly`` with its functions' code asset built from the project's code as it is now.

    The rebuild copies the agents' packages into a directory named by their content hash
    (``longstep_kit.bundling``): unchanged code gives the same directory, at the cost of hashing it.
    """
    if assembly.code_asset is None:
        return assembly
    from longstep_kit.bundling import build_function_code, default_cache
    from longstep_kit.config import load_config
    from longstep_kit.declarations import code_references

    config = load_config(merged_context.get("longstep"))
    current = build_function_code(assembly.project, code_references(config), default_cache(assembly.project))
    if assembly.assets[assembly.code_asset] == current:
        return assembly
    return replace(assembly, assets={**assembly.assets, assembly.code_asset: current})


def cache_dir() -> Path:
    """Where synthesized assemblies are kept: in the machine's shared cache (``bundling.shared_cache``),
    so that the same declarations synthesize once whatever project or clone they are in (a template
    holds no path of its project; its assets are staged inside the assembly)."""
    from longstep_kit.bundling import shared_cache

    return shared_cache() / "synth"


def _cached_or_synthesized(project: Path, merged: dict[str, Any], digest: str, progress: Callable[[str], None] | None) -> Assembly:
    cache = cache_dir()
    cached = cache / digest
    if (cached / COMPLETE).exists() and _extra_inputs_unchanged(project, cached):
        os.utime(cached)  # in use: a concurrent process's prune keeps it
        _remember(project, digest)
        return _load(project, cached)
    if progress is not None:
        progress(_announcement(cache, project))
    staging = cached.with_name(f"{cached.name}.{os.getpid()}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    began = time.perf_counter()
    before = set(sys.modules)
    _synth(project, merged, staging)
    (staging / EXTRA_INPUTS).write_text(json.dumps(_extra_inputs(project, merged, set(sys.modules) - before), sort_keys=True))
    (staging / COMPLETE).write_text(cached.name)
    if cached.exists():  # synthesized from project modules that changed since: replaced
        shutil.rmtree(cached, ignore_errors=True)
    try:
        staging.rename(cached)
    except OSError:  # another process cached the same inputs first
        shutil.rmtree(staging, ignore_errors=True)
    (cache / LAST_SECONDS).write_text(f"{time.perf_counter() - began:.0f}")
    _prune(cache, keep=KEEP_CACHED)
    _remember(project, digest)
    return _load(project, cached)


def _remember(project: Path, digest: str) -> None:
    try:
        (project / LAST_DIGEST).parent.mkdir(parents=True, exist_ok=True)
        (project / LAST_DIGEST).write_text(digest)
    except OSError:  # a read-only project still runs
        pass


def _announcement(cache: Path, project: Path) -> str:
    try:
        seconds = int((cache / LAST_SECONDS).read_text())
    except (OSError, ValueError):
        seconds = FIRST_SYNTH_ESTIMATE_SECONDS
    if (project / LAST_DIGEST).is_file():
        return f"agents' declarations, configuration or kit changed: synthesizing the CDK app, about {seconds} s"
    return f"synthesizing the CDK app (the first time for this project), about {seconds} s"


def _extra_inputs(project: Path, merged: dict[str, Any], imported: set[str]) -> dict[str, str]:
    """The project's own modules (not the agents', not the kit's) that synth imported, hashed."""
    import longstep
    import longstep_kit

    from longstep_kit.bundling import FUNCTIONS_SOURCE, agent_roots
    from longstep_kit.config import load_config
    from longstep_kit.declarations import code_references

    outside = [Path(longstep.__file__).parent, Path(longstep_kit.__file__).parent, FUNCTIONS_SOURCE]
    outside += [project / name for name in agent_roots(code_references(load_config(merged.get("longstep"))))]
    found = {}
    for name in imported:
        path = Path(getattr(sys.modules.get(name), "__file__", None) or "/").resolve()
        if path.suffix != ".py" or not path.is_relative_to(project) or any(path.is_relative_to(o) or path == o.with_suffix(".py") for o in outside):
            continue
        parts = path.relative_to(project).parts
        if any(part.startswith(".") or part in ("site-packages", "dist-packages", "node_modules") for part in parts):
            continue  # installed packages (a virtualenv inside the project): the kit's and the CDK's versions are hashed
        found[str(path.relative_to(project))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def _extra_inputs_unchanged(project: Path, cached: Path) -> bool:
    try:
        recorded = json.loads((cached / EXTRA_INPUTS).read_text())
    except (OSError, ValueError):
        return True  # an assembly from before extra inputs were recorded
    for relative, sha in recorded.items():
        path = project / relative
        if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != sha:
            return False
    return True


def _synth(project: Path, merged: dict[str, Any], outdir: Path) -> Assembly:
    quiet_node_banner()
    cdk_app = load_app_module(project)
    cdk_app.build_app(context=merged, outdir=str(outdir)).synth()
    return _load(project, outdir)


def _load(project: Path, outdir: Path) -> Assembly:
    """The assembly a synth left in ``outdir`` (its one stack, its template and file assets)."""
    from longstep_kit.bundling import FUNCTIONS_PACKAGE

    manifest = json.loads((outdir / "manifest.json").read_text())
    (stack_name,) = [name for name, art in manifest["artifacts"].items() if art["type"] == "aws:cloudformation:stack"]
    template = json.loads((outdir / f"{stack_name}.template.json").read_text())
    assets_manifest = json.loads((outdir / f"{stack_name}.assets.json").read_text())
    assets = {
        h: outdir / entry["source"]["path"] for h, entry in assets_manifest.get("files", {}).items() if entry["source"].get("packaging") == "zip"
    }
    code = [h for h, directory in sorted(assets.items()) if (directory / FUNCTIONS_PACKAGE).is_dir()]
    return Assembly(stack_name, template, outdir, assets, project, code[0] if len(code) == 1 else None)


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
