"""``module:callable`` references: how configuration names user code (agents, model providers)."""

from __future__ import annotations

import importlib
import re
from typing import Any, Callable

# "package.module:attribute": what cdk.json's ``agents`` values and LONGSTEP_AGENTS hold.
REFERENCE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")


def import_callable(reference: str, what: str, error: type[Exception]) -> Callable[..., Any]:
    """The callable ``reference`` names.

    Args:
        reference: ``module:callable``.
        what: how messages name it (``agent``, ``provider factory``).
        error: the exception class raised when it cannot be found.

    Raises:
        error: the module or the callable does not exist.
    """
    module_name, _, attr = reference.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise error(f"{what} {reference!r}: module {exc.name!r} not found") from None
    found = getattr(module, attr, None)
    if not callable(found):
        raise error(f"{what} {reference!r}: {module_name} has no callable {attr!r}")
    return found
