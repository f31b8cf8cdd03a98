"""Following a run's event stream (``longstep.events``): the loop behind ``longstep watch``, the run
UI and the Python client, and what a follower makes of the events it saw.

A follower polls the log from its last offset (one strongly consistent Query a poll), so a
follower that drops and comes back with ``after=N`` gets exactly the events after N. Retried and
replayed steps are settled here: :func:`visible` drops the events of the attempts that did not
count, and what is left tells the same story as the recorded steps (:func:`story`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from longstep import events as ev

# How often a follower reads the log: an event reaches it within about this long.
POLL_SECONDS = 0.5
ENDED = ("SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED")


def follow(
    log: ev.EventLog,
    run_id: str,
    status: Callable[[], str],
    after: int = -1,
    poll_seconds: float = POLL_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[dict[str, Any]]:
    """The run's events after ``after``, as they are appended, until its latest execution has ended.

    Args:
        status: the status of the run's latest execution (``RUNNING``, ``SUCCEEDED``...), read
            between polls; the follow ends once it is not running and the log has nothing newer.
    """
    while True:
        ended = status() in ENDED  # read before the log: events written before the end are in this read
        batch = log.read(run_id, after)
        for event in batch:
            after = event["offset"]
            yield event
        if ended and not batch:
            return
        if not batch:
            sleep(poll_seconds)


def superseded_attempts(events: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """The ``(step, attempt)`` pairs whose events do not count: named by a ``step.superseded``, or
    of a step whose ``step.finished`` names another attempt."""
    out = {(e["step"], e["superseded_attempt"]) for e in events if e["type"] == ev.STEP_SUPERSEDED}
    winners = {e["step"]: e.get("attempt") for e in events if e["type"] == ev.STEP_FINISHED}
    for e in events:
        step, attempt = e.get("step"), e.get("attempt")
        if step in winners and attempt is not None and attempt != winners[step] and e["type"] != ev.STEP_SUPERSEDED:
            out.add((step, attempt))
    return out


def visible(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events that count: those of superseded attempts, and the ``step.superseded`` markers, left out."""
    gone = superseded_attempts(events)
    return [e for e in events if e["type"] != ev.STEP_SUPERSEDED and (e.get("step"), e.get("attempt")) not in gone]


@dataclass(frozen=True)
class StoryLine:
    """One recorded step as the events tell it: a model reply (its text and the tools it called),
    or a tool call (its arguments, status and result)."""

    kind: str
    turn: int
    call: int | None
    text: str
    tools: tuple[str, ...] = ()
    args: Any = None
    status: str | None = None
    result: Any = None


def story(events: list[dict[str, Any]]) -> list[StoryLine]:
    """What the run did, step by step, from the events that count (a replayed step is told once).

    The model's text is the ``model.delta`` events of the attempt that counted, joined: for a
    follower, what was streamed is what was recorded. A step only replayed (its recording attempt
    ended before it said so) is told from ``step.replayed``, which carries the recorded result.
    """
    deltas: dict[str, dict[str, list[str]]] = {}
    started: dict[str, dict[str, Any]] = {}
    ended: dict[str, dict[str, Any]] = {}
    for e in visible(events):
        step = e.get("step")
        if e["type"] == ev.MODEL_DELTA:
            deltas.setdefault(step, {}).setdefault(e.get("attempt", ""), []).append(e["text"])
        elif e["type"] == ev.STEP_STARTED:
            started[step] = e
            deltas.setdefault(step, {})[e.get("attempt", "")] = []  # an attempt's text starts afresh
        elif e["type"] == ev.STEP_FINISHED or (e["type"] == ev.STEP_REPLAYED and ended.get(step, {}).get("type") != ev.STEP_FINISHED):
            ended[step] = e
    lines = []
    for step, e in ended.items():
        if e.get("kind") == "model":
            attempt = e.get("attempt") if e["type"] == ev.STEP_FINISHED else started.get(step, {}).get("attempt")
            streamed = deltas.get(step, {}).get(attempt or "")
            text = "".join(streamed) if streamed else str(e.get("text") or "")
            lines.append(StoryLine("model", int(e["turn"]), None, text, tuple(e.get("tools") or ())))
        else:
            args = e.get("args", started.get(step, {}).get("args"))
            lines.append(
                StoryLine("tool", int(e["turn"]), int(e["call"]), "", (e["tool"],), args=args, status=e.get("status"), result=e.get("result"))
            )
    return sorted(lines, key=lambda line: (line.turn, -1 if line.call is None else line.call))


def describe(event: dict[str, Any]) -> str:
    """One line of text for an event (``longstep watch``'s text output)."""
    kind, data = event["type"], {k: v for k, v in event.items() if k not in ("offset", "type", "at", "run_id", "attempt", "step")}
    where = ""
    if "turn" in data:
        where = f"turn {data.pop('turn')}" + (f" call {data.pop('call')}" if data.get("call") is not None else "")
        data.pop("call", None)
    if kind == ev.MODEL_DELTA:
        detail = repr(data.get("text", ""))
    elif kind == ev.STEP_SUPERSEDED:
        detail = f"attempt {str(event.get('superseded_attempt'))[:8]} does not count (step retried)"
    else:
        detail = " ".join(f"{k}={_short(v)}" for k, v in data.items())
    return f"{event['offset']:>6}  {kind:<19} {where:<16} {detail}".rstrip()


def _short(value: Any, width: int = 60) -> str:
    text = value if isinstance(value, str) else str(value)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
