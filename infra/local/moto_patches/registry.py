"""The registry of moto patches: each replaced attribute is recorded, and every one is put back
when the local stack stops (last patched first)."""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()
# (owner, attribute name, the original as found in the owner's own __dict__ or None if inherited)
_applied: list[tuple[Any, str, Any, bool]] = []
_MISSING = object()
# How many times a patch was applied or undone: what a cache of a patched class's contents keys on.
_generation = 0


def patch(owner: Any, name: str, replacement: Any) -> Any:
    """Replace ``owner.name`` with ``replacement`` until :func:`undo_all`.

    Args:
        owner: a class or module.
        name: the attribute to replace.
        replacement: its new value.

    Returns:
        The value ``owner.name`` had (what a wrapper should call), None if it had none.
    """
    global _generation
    with _lock:
        _generation += 1
        own = vars(owner).get(name, _MISSING) if hasattr(owner, "__dict__") else _MISSING
        original = getattr(owner, name, None)  # None: an attribute the owner lacks (an added API)
        _applied.append((owner, name, own, own is not _MISSING))
        setattr(owner, name, replacement)
        return original


def undo_all() -> None:
    """Put back every attribute :func:`patch` replaced, the last one first."""
    global _generation
    with _lock:
        _generation += 1
        while _applied:
            owner, name, own, had_own = _applied.pop()
            if had_own:
                setattr(owner, name, own)
            else:
                # The attribute was inherited (or set nowhere): remove ours so lookup finds it again.
                try:
                    delattr(owner, name)
                except AttributeError:
                    pass


def applied() -> list[tuple[Any, str]]:
    """The (owner, name) pairs patched now, oldest first (for tests and reports)."""
    with _lock:
        return [(owner, name) for owner, name, _, _ in _applied]


def generation() -> int:
    """A number that changes whenever a patch is applied or undone."""
    return _generation
