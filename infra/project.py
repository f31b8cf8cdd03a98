"""A Longstep project on disk: a directory with ``cdk.json``, ``app.py`` and its agents' code."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from longstep.agents import AgentCatalog


class ProjectNotFoundError(RuntimeError):
    """No Longstep project (a directory with ``cdk.json`` and ``app.py``) here or above."""


def find_project(start: Path | None = None) -> Path:
    """The nearest directory at or above ``start`` (the working directory) with ``cdk.json`` and ``app.py``.

    Raises:
        ProjectNotFoundError: there is none.
    """
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / "cdk.json").is_file() and (candidate / "app.py").is_file():
            return candidate
    raise ProjectNotFoundError(f"no Longstep project (cdk.json and app.py) in {here} or above; run `longstep init DIR` to make one")


def cdk_context(project: Path) -> dict[str, Any]:
    """The context of the project's ``cdk.json`` (deployment config and feature flags), as ``cdk synth`` sees it."""
    return dict(json.loads((project / "cdk.json").read_text()).get("context", {}))


def agent_catalog(project: Path | None = None) -> AgentCatalog:
    """The project's agents, as its deployment registers them (its code importable from here on)."""
    root = find_project(project)
    if str(root) not in sys.path:
        sys.path.append(str(root))
    return AgentCatalog(cdk_context(root).get("longstep", {}).get("agents", {}))
