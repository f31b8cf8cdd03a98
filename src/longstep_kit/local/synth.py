"""Synthesize the CDK app once per process into a cloud assembly directory."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
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
    """Synthesize the project's app (cached per process for the same project and context).

    Args:
        context: context overrides on top of ``cdk.json``'s.
        outdir: the cloud assembly directory; a fresh temporary one (removed at exit) by default.
        project: the project directory (default: :func:`find_project` from the working directory).
    """
    project = find_project(project)
    key = (str(project), json.dumps(context or {}, sort_keys=True))
    with _lock:
        if key in _cache:
            return _cache[key]
        if outdir is None:
            outdir = Path(tempfile.mkdtemp(prefix="longstep-cdk-"))
            atexit.register(shutil.rmtree, outdir, True)
        quiet_node_banner()
        cdk_app = load_app_module(project)

        overrides = context or {}
        defaults = cdk_context(project)
        merged = {**defaults, **overrides, "longstep": {**defaults.get("longstep", {}), **overrides.get("longstep", {})}}
        cloud = cdk_app.build_app(context=merged, outdir=str(outdir)).synth()
        stack = cloud.stacks[0]
        manifest = json.loads((outdir / f"{stack.stack_name}.assets.json").read_text())
        assets = {
            h: outdir / entry["source"]["path"]
            for h, entry in manifest.get("files", {}).items()
            if entry["source"].get("packaging") == "zip"
        }
        assembly = Assembly(stack.stack_name, stack.template, outdir, assets, project)
        _cache[key] = assembly
        return assembly


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
