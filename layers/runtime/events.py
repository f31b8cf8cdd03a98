"""A run's event stream: an append-only log of what the run does, outside the Step Functions history.

Every run has one, in its partition of the checkpoint table (``event#<offset>`` records), so it
never counts toward an execution's 25,000 history events or 256 KB payloads, shares the run's
retention, and needs no table, grant or variable of its own. Each event has a per-run ``offset``
(0, 1, 2, ... strictly increasing, no gaps), a dotted ``type`` (``step.started``,
``model.delta``, ``tool.finished``, ``run.finished``...), the time ``at`` (the runtime's clock:
virtual on the local stack) and what it is about.

Appending is gapless without a counter: a writer reads the log's last item, and writes its batch
at the offset that item ends at with a conditional put (``attribute_not_exists``). Items only ever
start where the log ends, so two writers that read the same end collide on the same key and the
loser reads again: the items tile ``[0, end)`` exactly. A batch is one item (a task writes its
events once or a few times per invocation, not once per token), so an event costs a fraction of
a Query and a PutItem.

Retries and replays are visible: the events of a step carry the ``attempt`` that made them (the
Lambda request id), ``step.finished`` names the attempt whose result was recorded, and a step
started again after a failed attempt first writes ``step.superseded`` naming the attempt whose
events no longer count (found at the log's tail, where a retried attempt's events are). A follower
that drops the events of superseded attempts sees what the recorded steps say.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterable

from longstep import clock, keys
from longstep.inputs import RUN_ID_PATTERN
from longstep.store import AlreadyRecordedError, StepStore

# Event types. A run's lifecycle, its steps, the model's text, tools, humans, waits and steering.
RUN_STARTED, RUN_RESUMED, RUN_CONTINUED, RUN_FINISHED = "run.started", "run.resumed", "run.continued", "run.finished"
STEP_STARTED, STEP_FINISHED, STEP_REPLAYED, STEP_FAILED, STEP_SUPERSEDED = (
    "step.started",
    "step.finished",
    "step.replayed",
    "step.failed",
    "step.superseded",
)
MODEL_DELTA, MODEL_CORRECTED = "model.delta", "model.corrected"
TOOL_STARTED, TOOL_FINISHED = "tool.started", "tool.finished"
APPROVAL_REQUESTED, APPROVAL_DECIDED = "approval.requested", "approval.decided"
WAIT_STARTED, WAIT_ENDED = "wait.started", "wait.ended"
SIGNAL_RECEIVED = "signal.received"
ESCALATION_RAISED = "escalation.raised"
CHILD_STARTED = "child.started"
MESSAGE_RECEIVED = "message.received"
RUN_PAUSED, RUN_UNPAUSED, RUN_STOPPED = "run.paused", "run.unpaused", "run.stopped"

# At most this many events in one item, and this many bytes of any one event's data (a tool's
# arguments or result is cut to a preview; a large result is an artifact reference already).
MAX_BATCH = 200
MAX_EVENT_BYTES = 8 * 1024
# How many of the log's last items a writer looks at for an earlier attempt of a step it starts.
TAIL_ITEMS = 4
# Bounded: a writer that loses this many races in a row gives up on its batch (logged) rather
# than fail the step it reports on. The stream is for watching; the recorded steps are the truth.
MAX_APPEND_TRIES = 25
_EVENTS = "events"
_RUN_ID = RUN_ID_PATTERN


def _preview(value: Any) -> Any:
    """``value`` if its JSON is small, else its JSON cut to ``MAX_EVENT_BYTES`` with a marker."""
    text = json.dumps(value, default=str)
    if len(text) <= MAX_EVENT_BYTES:
        return value
    return {"preview": text[:MAX_EVENT_BYTES], "truncated_bytes": len(text)}


class EventLog:
    """The event logs of runs, on the checkpoint store (reads are strongly consistent)."""

    def __init__(self, store: StepStore) -> None:
        self.store = store

    def _tail(self, run_id: str, items: int = 1) -> list[dict[str, Any]]:
        return self.store.query_between(run_id, keys.event_key(0), keys.EVENT_END, newest_first=True, limit=items)

    @staticmethod
    def _end(tail: list[dict[str, Any]]) -> int:
        return int(tail[0]["first"]) + int(tail[0]["count"]) if tail else 0

    def append(self, run_id: str, events: list[dict[str, Any]], supersede: Iterable[tuple[str, str]] = ()) -> int | None:
        """Append ``events`` (each with ``type`` and ``at``) as one item; returns the first offset.

        Args:
            supersede: ``(step, attempt)`` pairs this batch starts again: each earlier attempt of
                such a step found at the log's tail without its ``step.finished`` gets a
                ``step.superseded`` event first.

        Returns:
            The offset of the batch's first event, or None when it was given up (see MAX_APPEND_TRIES).
        """
        wanted = list(supersede)
        for _ in range(MAX_APPEND_TRIES):
            tail = self._tail(run_id, TAIL_ITEMS if wanted else 1)
            first = self._end(tail)
            batch = [*_superseded(tail, wanted), *events]
            numbered = [{**event, "offset": first + i} for i, event in enumerate(batch)]
            try:
                self.store.put_once(run_id, keys.event_key(first), {"first": first, "count": len(numbered), _EVENTS: json.dumps(numbered)})
            except AlreadyRecordedError:
                continue  # another writer took this offset first: read the end again
            return first
        return None

    def recent(self, run_id: str, items: int = 3) -> list[dict[str, Any]]:
        """The events of the log's last ``items`` items (appends), in order: its newest events."""
        return [event for item in reversed(self._tail(run_id, items)) for event in json.loads(item[_EVENTS])]

    def read(self, run_id: str, after: int = -1, limit_items: int | None = None) -> list[dict[str, Any]]:
        """The run's events with an offset above ``after``, in order (all of them by default)."""
        low = keys.event_key(max(0, after + 1 - MAX_BATCH))
        items = self.store.query_between(run_id, low, keys.EVENT_END, limit=limit_items)
        return [event for item in items for event in json.loads(item[_EVENTS]) if event["offset"] > after]


def _superseded(tail: list[dict[str, Any]], wanted: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """``step.superseded`` events for the earlier attempts of ``wanted``'s steps that the tail shows unfinished."""
    if not wanted:
        return []
    started: dict[tuple[str, str], dict[str, Any]] = {}
    finished: set[tuple[str, str]] = set()
    done: set[tuple[str, str]] = set()
    for item in reversed(tail):  # oldest first
        for event in json.loads(item[_EVENTS]):
            pair = (event.get("step"), event.get("attempt"))
            if event["type"] == STEP_STARTED:
                started[pair] = event
            elif event["type"] in (STEP_FINISHED, STEP_REPLAYED):
                finished.add(pair)
            elif event["type"] == STEP_SUPERSEDED:
                done.add((event.get("step"), event.get("superseded_attempt")))
    now = clock.now()
    out = []
    for step, attempt in wanted:
        for pair in started:
            if pair[0] == step and pair[1] != attempt and pair not in finished and pair not in done:
                out.append({"type": STEP_SUPERSEDED, "at": now, "step": step, "superseded_attempt": pair[1], "attempt": attempt})
    return out


@dataclass
class Emitter:
    """The events one invocation emits, buffered and appended in batches.

    Args:
        log: where the events go.
        attempt: this invocation's id (the Lambda request id): on every event of a step.
        flush_every_seconds: model text is appended at most this often while it streams.
    """

    log: EventLog | None
    attempt: str = ""
    flush_every_seconds: float = 0.25
    _pending: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    _runs: set[str] = field(default_factory=set)
    _restarts: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    _last_flush: float = field(default_factory=time.monotonic)  # the invocation's start
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def known(self, run_id: str) -> None:
        """``run_id`` names a run that exists (its record was read or written): its events are appended.

        Events of a run the invocation never found are dropped: bad input (a run id nobody
        started) never creates a stream.
        """
        self._runs.add(run_id)

    def emit(self, run_id: str, type_: str, **data: Any) -> None:
        """Buffer one event of ``run_id`` (written at the next ``flush``)."""
        if self.log is None or not _RUN_ID.fullmatch(str(run_id)):
            return
        event = {"type": type_, "at": clock.now(), "run_id": run_id, **{k: _preview(v) for k, v in data.items() if v is not None}}
        if "step" in data:
            event["attempt"] = self.attempt
        with self._lock:
            self._pending.setdefault(run_id, []).append(event)
            if type_ == STEP_STARTED:
                self._restarts.setdefault(run_id, []).append((data["step"], self.attempt))

    def delta(self, run_id: str, step: str, text: str) -> None:
        """Buffer a piece of the model's text, appending the buffer if it has waited long enough."""
        if not text:
            return
        self.emit(run_id, MODEL_DELTA, step=step, text=text)
        if time.monotonic() - self._last_flush >= self.flush_every_seconds:
            self.flush()

    def flush(self) -> None:
        """Append every buffered event, one item per run."""
        if self.log is None:
            return
        with self._lock:
            pending, restarts = self._pending, self._restarts
            self._pending, self._restarts = {}, {}
            self._last_flush = time.monotonic()
        for run_id, events in pending.items():
            if run_id not in self._runs:
                continue
            try:
                first = self.log.append(run_id, events, restarts.get(run_id, ()))
            except Exception as exc:  # noqa: BLE001 - the stream never fails the step it reports on
                first = None
                reason = f"{type(exc).__name__}: {exc}"
            else:
                reason = "too many concurrent writers"
            if first is None:
                from longstep.observability.logs import logger

                logger().warning("event batch not appended", extra={"run_id": run_id, "events": len(events), "reason": reason})


def step_name(turn: int, call: int | None = None) -> str:
    """The name events give a step: ``turn 3 model`` or ``turn 3 call 1``."""
    return f"turn {turn} model" if call is None else f"turn {turn} call {call}"
