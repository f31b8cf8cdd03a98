"""The registry of moto patches: each replaced attribute is recorded, and every one is put back
when the local stack stops (last patched first).

Every patch function is marked as one of three kinds, so what changes moto's answers is told
apart from what only makes moto faster:

- :func:`fidelity`: moto answers otherwise than AWS; the fix names the AWS documentation pages it
  follows, and the local stack answers as they say.
- :func:`speed`: moto's answers unchanged, computed with less work.
- :func:`harness`: the local stack's own machinery (the real handlers in-process, one virtual
  clock, fault injection): what a local run needs, not what AWS does.

A patch names the attribute it replaces; one moto no longer has (renamed or removed by an
upgrade) fails the stack's start with :class:`MissingMotoAttribute`, naming the patch, instead of
patching nothing and turning a fix silently off. An API moto lacks is added with :func:`add`,
which fails the same way once moto has it.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

_lock = threading.Lock()
# (owner, attribute name, the original as found in the owner's own __dict__ or None if inherited)
_applied: list[tuple[Any, str, Any, bool]] = []
_MISSING = object()
# How many times a patch was applied or undone: what a cache of a patched class's contents keys on.
_generation = 0
# The marked patch functions running now, innermost last (per thread): what an error names.
_running = threading.local()

SPEED, FIDELITY, HARNESS = "speed", "fidelity", "harness"
AWS_DOCS = "https://docs.aws.amazon.com/"
F = TypeVar("F", bound=Callable[..., Any])


class MissingMotoAttribute(AttributeError):
    """A patch names an attribute moto lacks (or an addition one moto has): moto changed under it."""


@dataclass(frozen=True)
class Marked:
    """What kind of patch a function is, and for a fidelity fix the AWS pages it follows."""

    name: str
    kind: str
    pages: tuple[str, ...] = ()


CATALOGUE: dict[str, Marked] = {}


def _mark(kind: str, pages: tuple[str, ...]) -> Callable[[F], F]:
    def decorate(fn: F) -> F:
        marked = Marked(fn.__name__, kind, pages)
        CATALOGUE[fn.__name__] = marked

        @functools.wraps(fn)
        def applying(*args: Any, **kwargs: Any) -> Any:
            stack = _running.__dict__.setdefault("stack", [])
            stack.append(marked.name)
            try:
                return fn(*args, **kwargs)
            finally:
                stack.pop()

        applying.__longstep_patch__ = marked  # type: ignore[attr-defined]
        return applying  # type: ignore[return-value]

    return decorate


def fidelity(*pages: str) -> Callable[[F], F]:
    """Mark a patch function as a fidelity fix: moto answers otherwise than AWS documents.

    Args:
        *pages: the AWS documentation pages (``https://docs.aws.amazon.com/...``) the fix follows.

    Raises:
        ValueError: no page is given, or one is not an AWS documentation page.
    """
    if not pages or not all(page.startswith(AWS_DOCS) for page in pages):
        raise ValueError(f"a fidelity fix cites the AWS documentation pages it follows ({AWS_DOCS}...): {pages}")
    return _mark(FIDELITY, pages)


def speed(fn: F) -> F:
    """Mark a patch function as a speed patch: moto's answers unchanged, with less work."""
    return _mark(SPEED, ())(fn)


def harness(fn: F) -> F:
    """Mark a patch function as the local stack's own machinery (in-process handlers, the clock, faults)."""
    return _mark(HARNESS, ())(fn)


def _who() -> str:
    stack = _running.__dict__.get("stack") or []
    return f"moto patch {stack[-1]!r}" if stack else "a moto patch"


def _where(owner: Any, name: str) -> str:
    return f"{getattr(owner, '__module__', '')}.{getattr(owner, '__qualname__', getattr(owner, '__name__', repr(owner)))}.{name}".lstrip(".")


def _moto_version() -> str:
    try:
        import moto

        return f"moto {moto.__version__}"
    except ImportError:  # pragma: no cover - the local stack needs moto
        return "moto"


def _replace(owner: Any, name: str, replacement: Any) -> Any:
    global _generation
    with _lock:
        _generation += 1
        own = vars(owner).get(name, _MISSING) if hasattr(owner, "__dict__") else _MISSING
        original = getattr(owner, name, None)
        _applied.append((owner, name, own, own is not _MISSING))
        setattr(owner, name, replacement)
        return original


def patch(owner: Any, name: str, replacement: Any) -> Any:
    """Replace ``owner.name`` with ``replacement`` until :func:`undo_all` (or :func:`undo`).

    Args:
        owner: a class or module of moto (or of a library moto uses).
        name: the attribute to replace; ``owner`` must have it.
        replacement: its new value.

    Returns:
        The value ``owner.name`` had (what a wrapper should call).

    Raises:
        MissingMotoAttribute: ``owner`` has no ``name``: the message names the patch.
    """
    if not hasattr(owner, name):
        raise MissingMotoAttribute(
            f"{_who()}: {_where(owner, name)} is not in {_moto_version()}; the patch would change nothing "
            "(moto renamed or removed it): update the patch to the new moto, or drop it"
        )
    return _replace(owner, name, replacement)


def add(owner: Any, name: str, value: Any) -> None:
    """Add ``owner.name``, an API moto lacks, until :func:`undo_all` (or :func:`undo`).

    Raises:
        MissingMotoAttribute: ``owner`` has ``name`` already (moto implements it now): the
            message names the patch, whose addition would hide moto's own.
    """
    if hasattr(owner, name):
        raise MissingMotoAttribute(
            f"{_who()}: {_where(owner, name)} is in {_moto_version()} now; the addition would hide it: drop or rework the patch"
        )
    _replace(owner, name, value)


def _restore(owner: Any, name: str, own: Any, had_own: bool) -> None:
    if had_own:
        setattr(owner, name, own)
        return
    # The attribute was inherited (or set nowhere): remove ours so lookup finds it again.
    try:
        delattr(owner, name)
    except AttributeError:
        pass


def undo(owner: Any, name: str) -> None:
    """Put back ``owner.name`` alone (a patch applied for part of a stack's life); nothing if not patched.

    Raises:
        RuntimeError: a later patch replaced the same attribute again (undo that one first).
    """
    global _generation
    with _lock:
        found = [i for i, (o, n, _, _) in enumerate(_applied) if o is owner and n == name]
        if not found:
            return
        if len(found) > 1:
            raise RuntimeError(f"{_where(owner, name)} is patched {len(found)} times: undo_all puts it back")
        _generation += 1
        _restore(*_applied.pop(found[0]))


def undo_all() -> None:
    """Put back every attribute :func:`patch` replaced, the last one first."""
    global _generation
    with _lock:
        _generation += 1
        while _applied:
            _restore(*_applied.pop())


def applied() -> list[tuple[Any, str]]:
    """The (owner, name) pairs patched now, oldest first (for tests and reports)."""
    with _lock:
        return [(owner, name) for owner, name, _, _ in _applied]


def generation() -> int:
    """A number that changes whenever a patch is applied or undone."""
    return _generation
