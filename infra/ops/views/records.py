"""A run's checkpoint records as the views read them: sizes, sort keys, and the values in them.

Also the JSON and time values the views decode from records and execution histories.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any, Mapping

from longstep import codec, keys
from longstep.humans.signals import WAITER_PREFIX

# Checkpoint records written more than once: parked, then answered with an update.
PARKED_PREFIXES = ("escalation#", "signal#")
WAITING_RECORD_STATUSES = ("pending", "waiting")


def item_bytes(item: Mapping[str, Any]) -> int:
    """The size of a DynamoDB item (typed attribute values) as DynamoDB counts it (``longstep.codec``)."""
    return codec.item_size(item)


def plain(item: dict[str, Any]) -> dict[str, Any]:
    """A typed item as plain values, its task tokens dropped (never shown, never kept): a signal
    head's parked waiters (``waiter_*``) hold one each."""
    return {name: value for name, value in codec.plain(item).items() if name != "task_token" and not name.startswith(WAITER_PREFIX)}


def turn_call_of(sk: str) -> tuple[int, int | None]:
    """``step#000003#tool#001`` -> (3, 1); ``step#000003#model`` -> (3, None);
    ``approval#000003#001`` -> (3, 1); ``escalation#000003#-01`` -> (3, None); ``signal#x`` -> (0, None)."""
    key = keys.parse(sk)
    return key.turn or 0, key.call if key.call is not None and key.call >= 0 else None


def offloaded_bytes(result: Any) -> int:
    """The size of a tool step's output stored in S3 instead of its record (0 when not offloaded)."""
    content = result.get("content") if isinstance(result, dict) else None
    ref = content.get("offloaded") if isinstance(content, dict) else None
    return int(ref.get("bytes", 0)) if isinstance(ref, dict) else 0


def epoch(value: Any) -> float | None:
    """Epoch seconds of a datetime or a number; None stays None."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value.timestamp()
    return float(value)


def json_value(text: Any) -> Any:
    """``text`` decoded as JSON (a value that is not a string as is); None when it is not JSON."""
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return None


def from_iso(text: Any) -> float:
    """Epoch seconds of an ISO 8601 instant (``2025-01-31T12:00:00Z``); 0 when absent."""
    if not text:
        return 0.0
    if isinstance(text, (int, float)):
        return float(text)
    return dt.datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
