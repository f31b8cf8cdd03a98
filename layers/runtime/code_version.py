"""The code version of a run: a hash of the runtime, the agent's code and its tool schemas.

Init records it in the run record when the run starts, so an operator can tell which code a run
started on (``longstep show``) and whether a deploy since then changed what it runs. It has three
parts, each a short hash, so that a difference says what changed:

- ``runtime``: every Python source file of the ``longstep`` package (the layer);
- ``agent``: the source files of the packages the agent's tools, verifier and conditions are
  defined in (a package's every module: helpers a tool imports count too), and its system prompt;
- ``tools``: each tool's name, effect class, approval flag and argument schema.

Hashing happens once per process and agent (a few dozen files): a warm Lambda pays nothing.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import sys
import threading
from pathlib import Path
from typing import Any, Iterable

from longstep.agent import Agent

# Hex digits kept of each hash: 64 bits, plenty to tell deployments apart.
DIGITS = 16
# Keyed by the agent object's id; the agent is kept in the entry so that the id is never reused.
_cache: dict[int, tuple[Agent, dict[str, str]]] = {}
_lock = threading.Lock()


def tool_schemas(agent: Agent) -> dict[str, Any]:
    """What the ``tools`` part hashes: each tool's effect class, approval flag and JSON schema."""
    return {
        name: {"effect": t.effect.value, "requires_approval": t.requires_approval, "schema": t.args_model.model_json_schema()}
        for name, t in sorted(agent.tools.tools.items())
    }


def tool_effects(agent: Agent) -> dict[str, dict[str, Any]]:
    """Each tool's effect class and approval flag (what the run record keeps of its tools)."""
    return {name: {"effect": t.effect.value, "requires_approval": t.requires_approval} for name, t in sorted(agent.tools.tools.items())}


def code_parts(agent: Agent) -> dict[str, str]:
    """The three parts of the code version of ``agent`` (cached per process and agent object)."""
    with _lock:
        if id(agent) not in _cache:
            _cache[id(agent)] = (agent, _compute(agent))
        return dict(_cache[id(agent)][1])


def _compute(agent: Agent) -> dict[str, str]:
    root = Path(__file__).resolve().parent
    runtime = _hash_files((str(p.relative_to(root)), p) for p in root.rglob("*.py"))
    agent_files = [(str(f.relative_to(d.parent)), f) for d in _agent_packages(agent) for f in (d.rglob("*.py") if d.is_dir() else [d])]
    agent_hash = _digest([_hash_files(agent_files).encode(), agent.system_prompt.encode("utf-8")])
    tools = _digest([json.dumps(tool_schemas(agent), sort_keys=True).encode()])
    return {"runtime": runtime, "agent": agent_hash, "tools": tools}


def code_version(parts: dict[str, str]) -> str:
    """The one-string code version of ``code_parts``: a hash of the three."""
    return _digest([f"{name}={parts[name]}".encode() for name in sorted(parts)])


def _agent_packages(agent: Agent) -> set[Path]:
    """The top-level package directories (or lone module files) that define the agent's callables,
    the runtime's own left out (the ``runtime`` part covers it)."""
    callables: list[Any] = [t.fn for t in agent.tools.tools.values()] + [t.check for t in agent.tools.tools.values() if t.check]
    callables += list(agent.conditions.values()) + ([agent.verifier] if agent.verifier else [])
    out: set[Path] = set()
    for fn in callables:
        module = inspect.getmodule(fn) or inspect.getmodule(type(fn))
        if module is None or module.__name__.split(".")[0] == "longstep":
            continue
        top = sys.modules.get(module.__name__.split(".")[0])
        source = getattr(top, "__file__", None)
        if source:
            path = Path(source).resolve()
            out.add(path.parent if path.name == "__init__.py" else path)
    return out


def _hash_files(files: Iterable[tuple[str, Path]]) -> str:
    """A hash of files by their names relative to their package's parent (the same wherever the
    code is unpacked: a checkout, the layer's /opt/python, a function's /var/task)."""
    h = hashlib.sha256()
    for name, path in sorted(files):
        if "__pycache__" in path.parts:
            continue
        h.update(name.encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:DIGITS]


def _digest(chunks: Iterable[bytes]) -> str:
    h = hashlib.sha256()
    for chunk in chunks:
        h.update(chunk + b"\0")
    return h.hexdigest()[:DIGITS]
