"""Markers written once by the attempt that acts (an at-most-once call's intent): the attempt
knows its own marker from one whose earlier attempt may have acted.

The marker carries a fresh attempt id. When the put's response is lost, the SDK sends it again
and the conditional put is refused by the marker it wrote itself; reading it back, the attempt
finds its own id and goes on: nothing acted before it. (Without the id it read as an earlier
attempt's marker, and the step escalated as "may have acted" though it never ran.)
"""

from __future__ import annotations

import secrets
from typing import Any, Mapping

from longstep.store import AlreadyRecordedError, StepStore

ATTEMPT = "attempt"


def put_own(store: StepStore, run_id: str, sk: str, attrs: Mapping[str, Any]) -> bool:
    """Write the marker ``sk`` once, under a fresh attempt id.

    Returns:
        True when the marker is this attempt's (written now, or by this very put whose response
        was lost); False when another attempt wrote it first.
    """
    attempt = secrets.token_urlsafe(12)
    try:
        store.put_once(run_id, sk, {**attrs, ATTEMPT: attempt})
    except AlreadyRecordedError:
        return (store.get(run_id, sk) or {}).get(ATTEMPT) == attempt
    return True
