"""What a failed run prints: one line per failure naming the state, the error and where to look.

A Lambda task's failure reaches Step Functions as ``{"errorType", "errorMessage", "stackTrace"}``
in the event's ``cause``
(https://docs.aws.amazon.com/step-functions/latest/dg/concepts-error-handling.html#error-handling-error-representation):
the line keeps the type and the first line of the message, never the stack trace or a file path.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_LINES = 5
_PATH = re.compile(r"(?:/[\w.@+-]+){2,}/?")  # an absolute path: a machine's, not the run's


def cause_summary(cause: Any, limit: int = 200) -> str:
    """The first line of a failure's cause: a Lambda error's message without its trace or paths."""
    text = "" if cause is None else str(cause)
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and "errorMessage" in parsed:
        text = str(parsed.get("errorMessage") or "")
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    first = _PATH.sub(lambda m: ".../" + m.group(0).rstrip("/").rsplit("/", 1)[-1], first)
    return first if len(first) <= limit else first[: limit - 3] + "..."


def failure_lines(events: list[dict[str, Any]], run_id: str, where: str = "longstep show {run}") -> list[str]:
    """One line per failed task attempt and for the execution's own failure, in order (at most ``MAX_LINES``).

    Args:
        events: the execution's history, oldest first (``ops.views.history.execution_history``'s shape:
            ``type``, and the event's details under the key its type names).
        run_id: the run (named in the hint).
        where: where to look next, ``{run}`` replaced by the run id.
    """
    state, lines = "?", []
    for event in events:
        kind = event.get("type", "")
        details = _details(event)
        if kind.endswith("StateEntered"):
            state = details.get("name", state)
        elif kind in ("TaskFailed", "LambdaFunctionFailed", "TaskTimedOut", "LambdaFunctionTimedOut", "ExecutionFailed", "ExecutionTimedOut"):
            error = details.get("error") or kind
            lines.append(f"  failed: state {state}: {error}: {cause_summary(details.get('cause'))}")
    if not lines:
        return []
    shown = lines[-MAX_LINES:]
    if len(lines) > MAX_LINES:
        shown.insert(0, f"  ({len(lines) - MAX_LINES} earlier failures not shown)")
    shown.append(f"  look: {where.format(run=run_id)}")
    return shown


def _details(event: dict[str, Any]) -> dict[str, Any]:
    for key, value in event.items():
        if key.endswith("EventDetails") and isinstance(value, dict):
            return value
    return {}
