"""Per-item atomicity for moto's DynamoDB.

Real DynamoDB evaluates a condition expression and applies the write atomically. moto's backend
does the check and the write in plain Python with no lock, so two threads can both pass
``attribute_not_exists`` and both write: exactly the race that the idempotency lock and the
conditional step records exist to prevent. The local stack (and the tests that run handlers
concurrently) therefore serialize moto's DynamoDB operations with one lock.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable

_LOCK = threading.RLock()
_OPERATIONS = ("put_item", "update_item", "delete_item", "transact_write_items", "get_item", "query", "scan")
_installed = False


def _locked(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _LOCK:
            return method(*args, **kwargs)

    wrapper.__longstep_locked__ = True  # type: ignore[attr-defined]
    return wrapper


def make_dynamodb_atomic() -> None:
    """Wrap moto's DynamoDB read and write operations in one re-entrant lock (idempotent)."""
    global _installed
    if _installed:
        return
    from moto.dynamodb.models import DynamoDBBackend

    for name in _OPERATIONS:
        method = getattr(DynamoDBBackend, name)
        if not getattr(method, "__longstep_locked__", False):
            setattr(DynamoDBBackend, name, _locked(method))
    _installed = True
