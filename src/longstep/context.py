"""The live context: what the model sees, kept bounded however long the run.

The checkpoint log holds every step (deltas). The live context is the goal, a summary of older
turns (when the context passed its token budget), and the turns since. Every ``snapshot_every``
turns a snapshot of the live context is written, so a cold start reads at most one snapshot and
the deltas after it; a warm Lambda keeps the context in memory and reads only what is new.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from longstep.messages import Message, canonical_json, text_of, tool_uses, user_text
from longstep.transcript import completed_turns, injected_turns, render_turns
from longstep.store import AlreadyRecordedError, CheckpointStore, StepRecord, decode_json, encode_json

SUMMARY_PREFIX = "summary#"
SNAPSHOT_PREFIX = "snapshot#"
# Snapshots larger than this (compressed) go to S3; the record keeps the reference.
SNAPSHOT_INLINE_BYTES = 300 * 1024
_CACHE_RUNS = 64


def summary_key(turn: int) -> str:
    return f"{SUMMARY_PREFIX}{turn:06d}"


def snapshot_key(turn: int) -> str:
    return f"{SNAPSHOT_PREFIX}{turn:06d}"


def estimate_tokens(messages: list[Message]) -> int:
    """A provider-neutral estimate: four bytes of canonical JSON per token."""
    return len(canonical_json(messages).encode("utf-8")) // 4


@dataclass
class LiveContext:
    """The part of a run the model sees.

    Attributes:
        goal: the run's goal (the first user message).
        summary: ``{"upto_turn": k, "text": ...}``: turns before k are summarized.
        turns: the recorded steps of the turns since the summary, by turn.
        loaded_upto: every record of every turn before this one is loaded.
        injected_before: summarized turns whose reply a fault injection replaced.
    """

    goal: str
    summary: dict[str, Any] | None = None
    turns: dict[int, dict[str, Any]] = field(default_factory=dict)
    loaded_upto: int = 0
    injected_before: int = 0

    @property
    def start(self) -> int:
        return self.summary["upto_turn"] if self.summary else 0

    def apply(self, steps: list[StepRecord]) -> None:
        for step in steps:
            parts = step.sk.split("#")
            turn = int(parts[1])
            if turn < self.start:
                continue
            slot = self.turns.setdefault(turn, {"model": None, "tools": {}})
            if step.kind == "model":
                slot["model"] = step.result
            else:
                slot["tools"][int(parts[3])] = step.result

    def summarize_upto(self, summary: dict[str, Any]) -> None:
        dropped = {t: s for t, s in self.turns.items() if t < summary["upto_turn"]}
        self.injected_before += injected_turns(dropped, summary["upto_turn"])
        self.summary = summary
        self.turns = {t: s for t, s in self.turns.items() if t >= summary["upto_turn"]}

    def messages(self, upto_turn: int) -> list[Message]:
        """The messages a model call of ``upto_turn`` is given."""
        out = [user_text(self.goal)]
        if self.summary:
            out.append({"role": "assistant", "content": [{"text": f"Summary of turns 0-{self.start - 1}: {self.summary['text']}"}]})
            out.append(user_text("Continue from there."))
        return out + render_turns(self.turns, self.start, upto_turn)

    def injected(self, upto_turn: int) -> int:
        """Turns before ``upto_turn`` whose reply a fault injection replaced."""
        return self.injected_before + injected_turns(self.turns, upto_turn)

    def to_state(self) -> dict[str, Any]:
        return {
            "goal": self.goal,
            "summary": self.summary,
            "turns": {str(t): s for t, s in self.turns.items()},
            "loaded_upto": self.loaded_upto,
            "injected_before": self.injected_before,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "LiveContext":
        return cls(
            goal=state["goal"],
            summary=state["summary"],
            turns={int(t): {"model": s["model"], "tools": {int(c): r for c, r in s["tools"].items()}} for t, s in state["turns"].items()},
            loaded_upto=state["loaded_upto"],
            injected_before=state.get("injected_before", 0),
        )


_cache: "OrderedDict[tuple[str, str], LiveContext]" = OrderedDict()
_cache_lock = threading.Lock()


def forget_cache() -> None:
    """Drop every cached context (tests; a local stack deployed afresh)."""
    with _cache_lock:
        _cache.clear()


def load(store: CheckpointStore, artifacts: Any, run_id: str, goal: str, upto_turn: int) -> LiveContext:
    """The live context of ``run_id`` with every turn before ``upto_turn`` loaded.

    Reads, in order of preference: the warm cache plus the records it has not seen; else the
    latest snapshot at or before ``upto_turn`` plus the records after it; else the whole log.
    """
    key = (store.table_name, run_id)
    with _cache_lock:
        cached = _cache.get(key)
    if cached is not None and cached.loaded_upto <= upto_turn:
        ctx = LiveContext.from_state(cached.to_state())  # a copy: concurrent invocations may share the cache
    else:
        ctx = _from_snapshot(store, artifacts, run_id, upto_turn) or LiveContext(goal=goal)
    if ctx.loaded_upto < upto_turn:
        summaries = [i for i in store.query_between(run_id, summary_key(ctx.loaded_upto), summary_key(upto_turn)) if i["sk"] != summary_key(upto_turn)]
        if summaries:  # each summary covers the one before it: the latest is enough
            ctx.summarize_upto(decode_json("summary", summaries[-1]))
        ctx.apply(store.steps_between(run_id, ctx.loaded_upto, upto_turn))
        ctx.loaded_upto = upto_turn
    remember(store, run_id, ctx)
    return ctx


def resume_point(store: CheckpointStore, artifacts: Any, run_id: str) -> int:
    """The first turn that is not complete, read from the latest snapshot and the records after it."""
    latest = store.latest(run_id, SNAPSHOT_PREFIX, SNAPSHOT_PREFIX + "~")
    start = LiveContext.from_state(_snapshot_state(artifacts, latest)).loaded_upto if latest else 0
    return start + completed_turns(store.steps_between(run_id, start), first=start)


def remember(store: CheckpointStore, run_id: str, ctx: LiveContext) -> None:
    with _cache_lock:
        _cache[(store.table_name, run_id)] = LiveContext.from_state(ctx.to_state())
        _cache.move_to_end((store.table_name, run_id))
        while len(_cache) > _CACHE_RUNS:
            _cache.popitem(last=False)


def _from_snapshot(store: CheckpointStore, artifacts: Any, run_id: str, upto_turn: int) -> LiveContext | None:
    item = store.latest(run_id, SNAPSHOT_PREFIX, snapshot_key(upto_turn))
    if item is None:
        return None
    return LiveContext.from_state(_snapshot_state(artifacts, item))


def _snapshot_state(artifacts: Any, item: dict[str, Any]) -> dict[str, Any]:
    if "state_ref" in item:
        return json.loads(artifacts.get(item["state_ref"]))
    return decode_json("state", item)


def write_snapshot(store: CheckpointStore, artifacts: Any, run_id: str, ctx: LiveContext) -> None:
    """Record the live context as of ``ctx.loaded_upto`` (once; a rewrite would be identical)."""
    state = ctx.to_state()
    encoded = encode_json("state", state)
    size = sum(len(v) for v in encoded.values())
    if size > SNAPSHOT_INLINE_BYTES:
        encoded = {"state_ref": artifacts.put(canonical_json(state).encode("utf-8"))["uri"]}
    try:
        store.put_once(run_id, snapshot_key(ctx.loaded_upto), encoded)
    except AlreadyRecordedError:
        pass


def record_summary(store: CheckpointStore, run_id: str, turn: int, summary: dict[str, Any]) -> dict[str, Any]:
    """Record the summary made at ``turn`` once; a concurrent or replayed one reads the first."""
    try:
        store.put_once(run_id, summary_key(turn), encode_json("summary", summary))
        return summary
    except AlreadyRecordedError:
        item = store.get(run_id, summary_key(turn))
        assert item is not None
        return decode_json("summary", item)


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
