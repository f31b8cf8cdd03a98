"""The time the runtime reads: ``now()``, wall time in Lambda, a virtual clock on the local stack.

Every runtime module that needs the current time (run timestamps, approval expiry, TTLs,
``wait_for`` deadlines) calls :func:`now`, never ``time.time()`` directly, so the local stack can
run the handlers on the same virtual clock as the state machine engine (days pass in an instant,
deterministically). In Lambda nothing overrides it and it is ``time.time()``.

An offset (:func:`skewed`) shifts what one invocation reads: the local stack's clock-skew fault
gives each handler its own error, as the machines behind different Lambda invocations have.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as dt
import time
from typing import Callable, Iterator

Source = Callable[[], float]

_process_source: Source = time.time
_context_source: contextvars.ContextVar[Source | None] = contextvars.ContextVar("longstep_clock", default=None)
_offset: contextvars.ContextVar[float] = contextvars.ContextVar("longstep_clock_offset", default=0.0)


def now() -> float:
    """The current time, in epoch seconds (a float, like ``time.time()``), with this context's offset."""
    source = _context_source.get()
    return (source or _process_source)() + _offset.get()


def now_utc() -> dt.datetime:
    """The current time as an aware UTC datetime."""
    return dt.datetime.fromtimestamp(now(), dt.timezone.utc)


def set_source(source: Source | None) -> None:
    """Make ``source`` the clock of the whole process (None: back to ``time.time``).

    For a local stack, which runs the handlers in the engine's threads.
    """
    global _process_source
    _process_source = source or time.time


@contextlib.contextmanager
def use_source(source: Source) -> Iterator[None]:
    """Read ``source`` in this context only (this thread or task and what it starts with a copied context)."""
    token = _context_source.set(source)
    try:
        yield
    finally:
        _context_source.reset(token)


def set_offset(seconds: float) -> contextvars.Token:
    """Shift what this context reads by ``seconds`` (a skewed machine); undo with :func:`reset_offset`.

    Returns:
        The token that :func:`reset_offset` takes.
    """
    return _offset.set(float(seconds))


def reset_offset(token: contextvars.Token) -> None:
    """Undo the :func:`set_offset` that returned ``token``."""
    _offset.reset(token)


@contextlib.contextmanager
def skewed(seconds: float) -> Iterator[None]:
    """Read the clock ``seconds`` off in this context only (negative: behind)."""
    token = set_offset(seconds)
    try:
        yield
    finally:
        reset_offset(token)
