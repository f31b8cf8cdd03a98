"""The time the runtime reads: ``now()``, wall time in Lambda, a virtual clock on the local stack.

Every runtime module that needs the current time (run timestamps, approval expiry, TTLs,
``wait_for`` deadlines) calls :func:`now`, never ``time.time()`` directly, so the local stack can
run the handlers on the same virtual clock as the state machine engine (days pass in an instant,
deterministically). In Lambda nothing overrides it and it is ``time.time()``.
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


def now() -> float:
    """The current time, in epoch seconds (a float, like ``time.time()``)."""
    source = _context_source.get()
    return (source or _process_source)()


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
