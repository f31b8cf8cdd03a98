"""The identifiers every record of a run carries: the run id (the first execution's name, and the
checkpoint table's partition key), the turn and the call, with their bounds."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field

# Execution names allow 80 characters of letters, digits, '-' and '_'; the run id is the first
# execution's name, and later generations add "--g<N>": 64 leaves room for that suffix.
MAX_RUN_ID = 64
RUN_ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,%d}" % MAX_RUN_ID)
RUN_ID_RULE = f"must be 1-{MAX_RUN_ID} characters of letters, digits, '-' or '_'"
MAX_TURNS = 10_000
# Sort keys give a call three digits (keys.tool_step_key): more would break their order.
MAX_CALLS_PER_TURN = 1_000


def check_run_id(value: str) -> str:
    """``value`` if it is a valid run id.

    Raises:
        ValueError: it is not (``RUN_ID_RULE``).
    """
    if not RUN_ID_PATTERN.fullmatch(value):
        raise ValueError(RUN_ID_RULE)
    return value


# Checked wherever a run id arrives, not only at the start: a cursor's run id becomes a DynamoDB
# key, which rejects an empty or oversized value with an error of its own (not a typed one).
RunId = Annotated[str, AfterValidator(check_run_id)]
Turn = Annotated[int, Field(ge=0, le=MAX_TURNS)]

__all__ = ["MAX_CALLS_PER_TURN", "MAX_RUN_ID", "MAX_TURNS", "RUN_ID_PATTERN", "RUN_ID_RULE", "RunId", "Turn", "check_run_id"]
