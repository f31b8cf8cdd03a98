"""The live context: what the model sees, kept bounded however long the run.

The checkpoint log holds every step (deltas). The live context is the goal, a summary of older
turns (when the context passed its token budget), and the turns since. Every ``snapshot_every``
turns a snapshot of the live context is written, so a cold start reads at most one snapshot and
the deltas after it; a warm Lambda keeps the context in memory and reads only what is new.

Snapshots and summaries are keyed among the steps (``step#<turn>#context``, ``step#<turn>#summary``,
see ``longstep.keys``) and the run record names the latest snapshot's turn (``snapshot_at``), so a
cold model turn reads two requests whatever the run's length: the run record (which the turn reads
anyway) and one Query from that snapshot's window to the turn.

A snapshot references what it covers instead of copying it: the first turn of its window (the
turn the summary in effect ends at), the turn whose summary record is in effect, and how many
summarized turns a fault injection replaced. The run record names each recent snapshot's first
turn (``snapshot_from``), so the Query starts there and returns the window's own records, the
summary among them: nothing of the context is stored twice. Snapshots written before this format
hold the context's state (``state``, ``state_z`` or an S3 ``state_ref``) and still load.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Mapping

from longstep import keys, outputs
from longstep.codec import decode_json, encode_json
from longstep.contract.run import RunRecord
from longstep.errors import StepRecordLostError
from longstep.messages import Message, canonical_json, user_text
from longstep.outputs import is_reference, resolve_within
from longstep.store import AlreadyRecordedError, Condition, StepRecord, StepStore, steps_of
from longstep.summaries import SUMMARY_TURN, outline, record_summary  # noqa: F401 - the context's summaries
from longstep.transcript import completed_turns, injected_turns, render_turns

# Snapshots that copy the context (a fork's window that starts in its parent's records, a context
# loaded from a snapshot of the older format) larger than this (compressed) go to S3.
SNAPSHOT_INLINE_BYTES = 300 * 1024
_CACHE_RUNS = 64
# A reference snapshot's attributes: its window's first turn, the turn of the summary record in
# effect (absent: none yet), the summarized turns a fault injection replaced.
WINDOW_FROM = "from_turn"
SUMMARY_AT = "summary_at"
INJECTED_BEFORE = "injected_before"
# How many snapshots' windows the run record names (the latest ones); a cold load of a turn
# before them reads the snapshot's window with a second Query.
WINDOWS_KEPT = 64

summary_key = keys.summary_key


def snapshot_windows(run: RunRecord | Mapping[str, Any]) -> dict[int, int]:
    """The first turn of each recent snapshot's window, by the snapshot's turn (the run record's)."""
    return RunRecord.of(run).outputs.snapshot_windows


snapshot_key = keys.snapshot_key


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
        holders: by turn, the earliest turn whose record holds a result the turn's records
            repeat (``longstep.outputs``): a snapshot's window reaches back to it.
        held: the tool results of summarized turns at or after the run's floor, by sort key: a
            later repeat may reference them, and a warm extension then reads nothing more.
        run: the run record it was loaded with (not part of its state): ``write_snapshot`` reads
            the snapshots' windows and the fork point there.
    """

    goal: str
    summary: dict[str, Any] | None = None
    turns: dict[int, dict[str, Any]] = field(default_factory=dict)
    loaded_upto: int = 0
    injected_before: int = 0
    holders: dict[int, int] = field(default_factory=dict)
    held: dict[str, Any] = field(default_factory=dict)
    run: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def start(self) -> int:
        return self.summary["upto_turn"] if self.summary else 0

    def apply(self, steps: list[StepRecord]) -> None:
        for step in steps:
            key = keys.parse(step.sk)
            if key.turn < self.start:
                continue
            slot = self.turns.setdefault(key.turn, {"model": None, "tools": {}})
            if step.kind == "model":
                slot["model"] = step.result
            else:
                slot["tools"][key.call] = step.result
            if step.holder is not None:
                held = int(keys.parse(step.holder).turn or 0)
                self.holders[key.turn] = min(held, self.holders.get(key.turn, held))

    def summarize_upto(self, summary: dict[str, Any]) -> None:
        dropped = {t: s for t, s in self.turns.items() if t < summary["upto_turn"]}
        self.injected_before += injected_turns(dropped, summary["upto_turn"])
        self.summary = summary
        self.turns = {t: s for t, s in self.turns.items() if t >= summary["upto_turn"]}
        self.holders = {t: h for t, h in self.holders.items() if t >= summary["upto_turn"]}
        for turn, slot in dropped.items():
            self.held.update({keys.tool_step_key(turn, call): result for call, result in slot["tools"].items()})
        self.keep_held()

    def keep_held(self) -> None:
        """Forget the held results before the run's floor: no repeat references them any more."""
        floor = outputs.floor(self.run)
        self.held = {sk: r for sk, r in self.held.items() if int(keys.parse(sk).turn or 0) >= floor}

    @property
    def window_from(self) -> int:
        """The first turn a snapshot of this context references: its summary's end, or an earlier
        turn holding a result its turns repeat."""
        return min([self.start, *self.holders.values()])

    def messages(self, upto_turn: int) -> list[Message]:
        """The messages a model call of ``upto_turn`` is given."""
        out = [user_text(self.goal)]
        if self.summary:
            out.append({"role": "assistant", "content": [{"text": f"Summary of turns 0-{self.start - 1}: {self.summary['text']}"}]})
            out.append(user_text("Continue from there."))
        return render_turns(self.turns, self.start, upto_turn, out)

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
            "holders": {str(t): h for t, h in self.holders.items()},
            "held": dict(self.held),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "LiveContext":
        return cls(
            goal=state["goal"],
            summary=state["summary"],
            turns={int(t): {"model": s["model"], "tools": {int(c): r for c, r in s["tools"].items()}} for t, s in state["turns"].items()},
            loaded_upto=state["loaded_upto"],
            injected_before=state.get("injected_before", 0),
            holders={int(t): int(h) for t, h in state.get("holders", {}).items()},
            held=dict(state.get("held", {})),
        )


_cache: "OrderedDict[tuple[str, str], LiveContext]" = OrderedDict()
_cache_lock = threading.Lock()


def forget_cache() -> None:
    """Drop every cached context (tests; a local stack deployed afresh)."""
    with _cache_lock:
        _cache.clear()


def load(store: StepStore, artifacts: Any, run_id: str, run: Mapping[str, Any], upto_turn: int, snapshot_every: int | None = None) -> LiveContext:
    """The live context of ``run_id`` with every turn before ``upto_turn`` loaded.

    Reads one Query in the normal case: the warm cache plus the records of the turns it has not
    seen; else the latest snapshot at or before ``upto_turn`` plus the records after it; else the
    whole log. For a past turn (a fork's or a replay's: the run's latest snapshot is later), the
    Query starts at the snapshot a run writes every ``snapshot_every`` turns before it, and at
    turn 0 only when that snapshot is not there (a second Query).

    Args:
        store: the checkpoint store.
        artifacts: the artifact store (snapshots too large for an item are there).
        run_id: the run.
        run: its run record: the goal, and ``snapshot_at``, where the Query of a cold load starts.
        upto_turn: the turn whose model call the context is for.
    """
    key = (store.table_name, run_id)
    with _cache_lock:
        cached = _cache.get(key)
    if cached is not None and cached.loaded_upto <= upto_turn:
        ctx = LiveContext.from_state(cached.to_state())  # a copy: concurrent invocations may share the cache
        if ctx.loaded_upto < upto_turn:
            # The turns after the cached ones; a snapshot at ``loaded_upto`` (sorted before its
            # turn's reply) holds nothing new.
            _extend(ctx, store.query_between(run_id, keys.model_step_key(ctx.loaded_upto), keys.turn_key(upto_turn)), upto_turn, store, run_id)
    else:
        latest = RunRecord.of(run).outputs.snapshot_at
        first = 0
        if latest is not None and latest <= upto_turn:
            first = latest
        elif latest is not None and snapshot_every:  # a past turn: the snapshot written before it
            first = upto_turn // snapshot_every * snapshot_every
        ctx, items, read = _cold(store, artifacts, run_id, run, first, upto_turn, snapshot_every)
        _extend(ctx, items, upto_turn, store, run_id, read)
    ctx.run = run
    ctx.keep_held()
    remember(store, run_id, ctx)
    return ctx


def _cold(
    store: StepStore, artifacts: Any, run_id: str, run: Mapping[str, Any], first: int, upto_turn: int, snapshot_every: int | None
) -> tuple[LiveContext, list[dict[str, Any]], list[dict[str, Any]]]:
    """The context as of the latest snapshot at or after ``first`` and the records after it: one
    Query from that snapshot's window (its first turn, when the run record names it), a second when
    the snapshot is not there or its window starts before the Query did (its pointer lost in a crash)."""
    whole = keys.turn_key(0)
    window = snapshot_windows(run).get(first)
    low = keys.turn_key(window) if window is not None else keys.snapshot_key(first) if first else whole
    for _ in range(2):
        items = store.query_between(run_id, low, keys.snapshot_key(upto_turn))
        found = _from_snapshot(store, artifacts, run_id, items, low, run, snapshot_every)
        if isinstance(found, tuple):
            return (*found, items)
        if found is None and low == whole:
            break
        # No snapshot there (another cadence then): the whole log; else the window it names.
        low = whole if found is None else found
    if found is not None:
        raise StepRecordLostError(f"run {run_id}: the window of the snapshot before turn {upto_turn} starts at {low} but is not there (expired?)")
    return LiveContext(goal=RunRecord.of(run).goal), items, items


def _from_snapshot(
    store: StepStore, artifacts: Any, run_id: str, items: list[dict[str, Any]], low: str, run: Mapping[str, Any], snapshot_every: int | None
) -> tuple[LiveContext, list[dict[str, Any]]] | str | None:
    """The context as of the latest snapshot among ``items`` (read from ``low``) and the items
    after it; None when there is no snapshot; the key its window starts at when the items do not
    reach back to it."""
    snapshots = [i for i, item in enumerate(items) if keys.parse(item["sk"]).kind == keys.SNAPSHOT]
    if not snapshots:
        return None
    at = snapshots[-1]  # normally the only one; later ones when ``snapshot_at`` lags (a crash)
    item = items[at]
    if WINDOW_FROM not in item:
        return LiveContext.from_state(_snapshot_state(store, artifacts, item, run, snapshot_every)), items[at + 1 :]
    start = keys.turn_key(int(item[WINDOW_FROM]))
    if start < low:
        return start
    summary = None
    if SUMMARY_AT in item:
        sk = keys.summary_key(int(item[SUMMARY_AT]))
        found = [i for i in items[:at] if i["sk"] == sk]
        if not found:
            raise StepRecordLostError(f"snapshot {item['sk']} of run {run_id}: its summary {sk} is missing (expired or removed)")
        summary = {**decode_json("summary", found[0]), SUMMARY_TURN: int(item[SUMMARY_AT])}
    ctx = LiveContext(goal=RunRecord.of(run).goal, summary=summary, injected_before=int(item.get(INJECTED_BEFORE, 0)))
    ctx.apply(store.resolve(run_id, _live(ctx, steps_of(items[:at]))))
    ctx.loaded_upto = int(keys.parse(item["sk"]).turn or 0)
    return ctx, items[at + 1 :]


def _extend(
    ctx: LiveContext, items: list[dict[str, Any]], upto_turn: int, store: StepStore, run_id: str, read: list[dict[str, Any]] | None = None
) -> None:
    """Apply the summaries and steps of the turns from ``ctx.loaded_upto`` to ``upto_turn``.

    A repeated tool result's holder is among the records a cold load ``read`` (its Query starts at
    the snapshot's window); a warm context has it loaded, or reads it (a holder in summarized turns).
    """
    summaries = [i for i in items if keys.parse(i["sk"]).kind == keys.SUMMARY]
    if summaries:  # each summary covers the one before it: the latest is enough
        latest = summaries[-1]
        ctx.summarize_upto({**decode_json("summary", latest), SUMMARY_TURN: keys.parse(latest["sk"]).turn})
    loaded = _loaded(ctx) + [s for s in steps_of(read or []) if not is_reference(s.result)]
    ctx.apply(store.resolve(run_id, _live(ctx, resolve_within(loaded + steps_of(items))[len(loaded) :])))
    ctx.loaded_upto = upto_turn


def _live(ctx: LiveContext, steps: list[StepRecord]) -> list[StepRecord]:
    """The steps of the turns the context keeps (a summarized turn's references need no holder)."""
    return [s for s in steps if int(keys.parse(s.sk).turn or 0) >= ctx.start]


def _loaded(ctx: LiveContext) -> list[StepRecord]:
    """The tool results a context holds, as records (the holders a warm extension may need)."""
    live = [StepRecord(keys.tool_step_key(t, c), keys.TOOL, "", r) for t, slot in sorted(ctx.turns.items()) for c, r in sorted(slot["tools"].items())]
    return [StepRecord(sk, keys.TOOL, "", r) for sk, r in sorted(ctx.held.items())] + live


def resume_point(store: StepStore, artifacts: Any, run_id: str, run: Mapping[str, Any]) -> int:
    """The first turn that is not complete, read from the latest snapshot and the records after it
    (one Query from the run record's ``snapshot_at``).

    A snapshot's key names its turn (``loaded_upto``): its state need not be read.
    """
    latest = RunRecord.of(run).outputs.snapshot_at
    items = store.query_between(run_id, keys.snapshot_key(latest or 0), keys.STEP_PREFIX + "~")
    snapshots = [i for i, item in enumerate(items) if keys.parse(item["sk"]).kind == keys.SNAPSHOT]
    if snapshots:
        start = int(keys.parse(items[snapshots[-1]]["sk"]).turn or 0)
        items = items[snapshots[-1] + 1 :]
    else:
        start = 0
    return start + completed_turns(steps_of(items), first=start)


def remember(store: StepStore, run_id: str, ctx: LiveContext) -> None:
    with _cache_lock:
        _cache[(store.table_name, run_id)] = LiveContext.from_state(ctx.to_state())
        _cache.move_to_end((store.table_name, run_id))
        while len(_cache) > _CACHE_RUNS:
            _cache.popitem(last=False)


def _snapshot_state(
    store: StepStore, artifacts: Any, item: dict[str, Any], run: Mapping[str, Any], snapshot_every: int | None = None
) -> dict[str, Any]:
    if keys.FORKED_FROM in item:
        # A fork's first snapshot holds no state: the parent's context at the fork point, read
        # from the parent's records (shared, never copied; ``longstep_kit.ops.fork``), under the
        # fork's own goal.
        origin = json.loads(item[keys.FORKED_FROM])
        parent = store.get(origin["run_id"], keys.RUN_RECORD)
        if parent is None:  # never an empty history in its place
            raise StepRecordLostError(
                f"forked_from: run {origin['run_id']}, whose first {origin['at_turn']} turns this run shares, has no records (expired?)"
            )
        return {**load(store, artifacts, origin["run_id"], parent, int(origin["at_turn"]), snapshot_every).to_state(), "goal": RunRecord.of(run).goal}
    if "state_ref" in item:
        return json.loads(artifacts.get(item["state_ref"]))
    return decode_json("state", item)


def write_snapshot(store: StepStore, artifacts: Any, run_id: str, ctx: LiveContext) -> None:
    """Record the live context as of ``ctx.loaded_upto`` (once; a rewrite would be identical) and
    point the run record at it and its window (a later snapshot is never replaced by an earlier one).

    The snapshot references the window's records (``WINDOW_FROM``...). It copies the context only
    when those records are not all the run's own (a fork whose window starts in its parent's
    turns) or when the summary's record is not known (a context loaded from an older snapshot).
    """
    at = ctx.loaded_upto
    windows = snapshot_windows(ctx.run)
    if _references(ctx):
        encoded: dict[str, Any] = {WINDOW_FROM: ctx.window_from, INJECTED_BEFORE: ctx.injected_before}
        if ctx.summary:
            encoded[SUMMARY_AT] = int(ctx.summary[SUMMARY_TURN])
        windows[at] = ctx.window_from
    else:
        state = {k: v for k, v in ctx.to_state().items() if k != "held"}  # a cold load reads holders from the records
        encoded = encode_json("state", state)
        size = sum(len(v) for v in encoded.values())
        if size > SNAPSHOT_INLINE_BYTES:
            encoded = {"state_ref": artifacts.put(canonical_json(state).encode("utf-8"))["uri"]}
        windows.pop(at, None)
    try:
        store.put_once(run_id, snapshot_key(at), encoded)
    except AlreadyRecordedError:
        pass  # written before a crash: the pointer below may not have been
    kept = dict(sorted(windows.items())[-WINDOWS_KEPT:])
    values: dict[str, Any] = {keys.SNAPSHOT_AT: at}
    if kept:
        values[keys.SNAPSHOT_WINDOWS] = json.dumps({str(k): v for k, v in kept.items()}, separators=(",", ":"))
    store.update(run_id, keys.RUN_RECORD, values, when=Condition(exists=True, below={keys.SNAPSHOT_AT: at}))


def _references(ctx: LiveContext) -> bool:
    """Whether a snapshot of ``ctx`` can reference its window's records: they are all this run's
    (a fork's first turns are its parent's) and the summary in effect names its record."""
    if ctx.summary and SUMMARY_TURN not in ctx.summary:
        return False
    forked = RunRecord.of(ctx.run).outputs.forked_from
    return not forked or ctx.start >= int(forked["at_turn"])
