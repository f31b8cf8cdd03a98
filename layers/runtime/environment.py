"""The environment of the function being invoked: what the runtime reads its settings from.

In Lambda this is the process environment. The local stack runs every function in one process,
each with its own environment: it binds the function's variables for the duration of an
invocation with :func:`use_environment` (a context variable, so concurrent invocations on other
threads, such as the tool calls of one Map, each see their own), and nothing is ever written to
``os.environ``.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from typing import Iterator, Mapping

_bound: contextvars.ContextVar[Mapping[str, str] | None] = contextvars.ContextVar("longstep_environment", default=None)


def environ() -> Mapping[str, str]:
    """The current function's environment: the bound one, else ``os.environ``."""
    bound = _bound.get()
    return os.environ if bound is None else bound


def get(name: str, default: str = "") -> str:
    """One variable of the current function's environment."""
    return environ().get(name, default)


@contextlib.contextmanager
def use_environment(variables: Mapping[str, str]) -> Iterator[None]:
    """Run the block with ``variables`` as the function's environment, on top of the process's.

    The process environment stays the base (credentials, region, as Lambda provides them); the
    function's own variables override it for this thread of execution only.
    """
    token = _bound.set({**os.environ, **variables})
    try:
        yield
    finally:
        _bound.reset(token)
