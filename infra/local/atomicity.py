"""Per-item atomicity for moto's DynamoDB.

Real DynamoDB evaluates a condition expression and applies the write atomically. moto's backend
does the check and the write in plain Python with no lock, so two threads can both pass
``attribute_not_exists`` and both write: exactly the race that the idempotency lock and the
conditional step records exist to prevent. The local stack (and the tests that run handlers
concurrently) therefore serialize moto's DynamoDB operations with one lock.
"""

from __future__ import annotations

import threading

from longstep_kit.local import moto_patches

_LOCK = threading.RLock()
_OPERATIONS = ("put_item", "update_item", "delete_item", "transact_write_items", "get_item", "query", "scan")


def make_dynamodb_atomic() -> None:
    """Wrap moto's DynamoDB read and write operations in one re-entrant lock (idempotent).

    Undone with every other moto patch by :func:`longstep_kit.local.moto_patches.undo_all`.
    """
    moto_patches.dynamodb_atomic(_LOCK, _OPERATIONS)


def dynamodb_lock() -> threading.RLock:
    """The lock those operations take (for the local stack's own writes, TTL deletions)."""
    return _LOCK
