"""Summaries of a run's older turns: the outline a summarizer reads, and the summary recorded
once (``longstep.context`` puts it in the live context and references it from snapshots)."""

from __future__ import annotations

from typing import Any

from longstep import keys
from longstep.codec import decode_json, encode_json
from longstep.messages import canonical_json, text_of, tool_uses
from longstep.store import AlreadyRecordedError, StepStore

# The key of a summary (in a LiveContext) naming the turn whose record holds it.
SUMMARY_TURN = "turn"


def record_summary(store: StepStore, run_id: str, turn: int, summary: dict[str, Any]) -> dict[str, Any]:
    """Record the summary made at ``turn`` once; a concurrent or replayed one reads the first.

    Returns:
        The summary recorded, naming the turn of its record (``SUMMARY_TURN``: a snapshot
        references it there).
    """
    try:
        store.put_once(run_id, keys.summary_key(turn), encode_json("summary", summary))
        return {**summary, SUMMARY_TURN: turn}
    except AlreadyRecordedError:
        item = store.get(run_id, keys.summary_key(turn))
        assert item is not None
        return {**decode_json("summary", item), SUMMARY_TURN: turn}


def outline(turns: dict[int, dict[str, Any]], start: int, end: int) -> str:
    """A plain rendering of turns for a summarizer: what the model said and what tools returned."""
    lines = []
    for turn in range(start, end):
        slot = turns.get(turn)
        if not slot or not slot["model"]:
            continue
        message = slot["model"]["message"]
        said = text_of(message)
        if said:
            lines.append(f"turn {turn}: {said}")
        for index, use in enumerate(tool_uses(message)):
            result = slot["tools"].get(index, {})
            lines.append(f"turn {turn}: {use['name']}({canonical_json(use['input'])[:200]}) -> {canonical_json(result.get('content'))[:200]}")
    return "\n".join(lines)
