"""Hot reload for a served local stack: changed agent code runs on the next invocation.

``longstep local serve`` and ``longstep dev`` keep a stack in memory for as long as a developer
works. Before each Lambda invocation, :class:`CodeReloader` looks at the files of the agents' and
workflows' packages (their sizes and modification times: a few dozen ``stat`` calls); when one
changed, it rebuilds the functions' code asset from the project (``local/synth.py``), points the
dispatcher at it, and forgets the modules imported from the old code, so the invocation that
follows imports the new. The stack, its tables and the runs in it stay as they are: a run parked
on an approval continues on the new code, as a run on AWS continues on a new function version.

A change of the agents' *declarations* (a table, a grant, a condition) changes the template, which
a reload cannot: the reloader says so and the developer restarts the serve.
"""

from __future__ import annotations

import importlib
import sys
import threading
from pathlib import Path
from typing import Any, Callable

Fingerprint = dict[str, tuple[int, int]]


class CodeReloader:
    """Called by the dispatcher before each invocation (``Dispatcher.reload``).

    Args:
        stack: the started local stack (its assembly, dispatcher and context).
        announce: called with one line per reload (what changed, what runs now).
    """

    def __init__(self, stack: Any, announce: Callable[[str], None]) -> None:
        from longstep_kit.bundling import FUNCTIONS_SOURCE, agent_roots
        from longstep_kit.config import load_config
        from longstep_kit.declarations import code_references
        from longstep_kit.local.synth import merged_context

        self.stack, self.announce = stack, announce
        self.project: Path = stack.assembly.project
        self.context = merged_context(self.project, stack.context)
        roots = agent_roots(code_references(load_config(self.context.get("longstep"))))
        self.roots = [self.project / name for name in roots] + [self.project / f"{name}.py" for name in roots] + [FUNCTIONS_SOURCE]
        self._lock = threading.Lock()
        self._seen = self._fingerprint()
        self.reloads = 0

    def _fingerprint(self) -> Fingerprint:
        found: Fingerprint = {}
        for root in self.roots:
            files = [root] if root.is_file() else root.rglob("*.py") if root.is_dir() else []
            for path in files:
                if "__pycache__" not in path.parts:
                    status = path.stat()
                    found[str(path)] = (status.st_mtime_ns, status.st_size)
        return found

    def __call__(self) -> None:
        """Reload if the agents' code changed since the last invocation (one reload at a time)."""
        with self._lock:
            now = self._fingerprint()
            if now == self._seen:
                return
            changed = sorted(name for name in now.keys() | self._seen.keys() if now.get(name) != self._seen.get(name))
            self._seen = now
            self._reload(changed)

    def _reload(self, changed: list[str]) -> None:
        from longstep import references
        from longstep_kit.local.synth import with_current_code

        assembly = self.stack.assembly
        if assembly.code_asset is None:
            return
        old = assembly.assets[assembly.code_asset]
        try:
            fresh = with_current_code(assembly, self.context)
        except Exception as exc:  # a half-saved file, a package gone: keep serving the code that ran
            self.announce(f"reload skipped: {type(exc).__name__}: {' '.join(str(exc).split())}")
            return
        new = fresh.assets[assembly.code_asset]
        self.stack.assembly = fresh
        self.stack.dispatcher.code_dirs[f"{assembly.code_asset}.zip"] = new
        if str(old) in sys.path:
            sys.path.remove(str(old))
        forgotten = _forget_modules([old, *self.roots])
        references.forget_built()
        importlib.invalidate_caches()
        if self.stack.dispatcher.isolation is not None:
            self.stack.dispatcher.isolation.recycle()
        self.reloads += 1
        names = ", ".join(_relative(Path(name), self.project) for name in changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
        self.announce(f"reloaded: {names} changed; {forgotten} module(s) re-imported on the next invocation (runs in progress continue)")


def _forget_modules(roots: list[Path]) -> int:
    """Drop from ``sys.modules`` every module loaded from under ``roots``; how many were dropped."""
    from longstep_kit.bundling import FUNCTIONS_PACKAGE

    resolved = [root.resolve() for root in roots]
    dropped = 0
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if not file:
            continue
        path = Path(file).resolve()
        if name.split(".")[0] == FUNCTIONS_PACKAGE or any(path == root or path.is_relative_to(root) for root in resolved):
            del sys.modules[name]
            dropped += 1
    return dropped


def _relative(path: Path, project: Path) -> str:
    return str(path.relative_to(project)) if path.is_relative_to(project) else path.name
