"""A run's timeline: its recorded steps, and its waits for a human or an event, in order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from longstep import keys
from longstep.humans.table import PENDING as APPROVAL_PENDING
from longstep_kit.ops.views.history import STEP_STATES, Attempt
from longstep_kit.ops.views.records import PARKED_PREFIXES, WAITING_RECORD_STATUSES, from_iso, json_value, offloaded_bytes, turn_call_of

_RANK = {"approval": 0, "wait": 1, "escalation": 2}


@dataclass
class TimelineEntry:
    """One row of a run's timeline: a recorded step, or a wait for a human or an event.

    Attributes:
        at: when the step was recorded or the wait began (epoch seconds).
        turn: the model turn.
        call: the tool call index (None for a model step).
        kind: ``model`` or ``tool`` (recorded steps); ``approval``, ``escalation`` or ``wait``.
        name: the model operation, the tool, or what is awaited.
        seconds: Lambda time spent on the step, all attempts and executions (from the history);
            for a wait, how long it waited (so far, when it still waits).
        input_tokens: model input tokens (model steps).
        output_tokens: model output tokens (model steps).
        bytes: size of the record in the checkpoint table.
        offloaded_bytes: size of the output stored in S3 instead (tool steps).
        retries: failed invocations of the step that Step Functions retried or escalated.
        result: the stop reason, the tool's status, or the human's answer.
        effect: the tool's effect class, when known.
    """

    at: float
    turn: int
    call: int | None
    kind: str
    name: str
    seconds: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    bytes: int = 0
    offloaded_bytes: int = 0
    retries: int = 0
    result: str = ""
    effect: str | None = None


def build_timeline(
    records: dict[str, dict[str, Any]],
    sizes: dict[str, int],
    steps: dict[str, Any],
    attempts: list[Attempt],
    requests: list[dict[str, Any]],
    effects: Mapping[str, str] | None,
    now: float,
) -> list[TimelineEntry]:
    """A run's rows: each recorded step with its Lambda time and retries, each parked record and
    approval request as a wait, placed before the step it held up.

    Args:
        records: the run's records as plain values, by sort key.
        sizes: each record's size in bytes, by sort key.
        steps: each recorded step's result, by sort key.
        attempts: the invocations in the run's histories.
        requests: the run's approval requests (views from ``longstep.humans.requests``).
        effects: tool name -> effect class, when known.
        now: the current time (epoch seconds) for waits still open.
    """
    spent: dict[tuple[int, int | None], float] = {}
    failed: dict[tuple[int, int | None], int] = {}
    for a in attempts:
        if a.state not in STEP_STATES or a.turn is None:
            continue
        key = (a.turn, a.call)
        spent[key] = spent.get(key, 0.0) + (a.seconds or 0.0)
        failed[key] = failed.get(key, 0) + (0 if a.ok else 1)
    rows: list[TimelineEntry] = []
    for sk, record in records.items():
        if sk.startswith(keys.STEP_PREFIX) and keys.parse(sk).is_step:
            turn, call = turn_call_of(sk)
            result = steps.get(sk) or {}
            row = TimelineEntry(
                at=float(record.get("recorded_at", 0)),
                turn=turn,
                call=call,
                kind=record.get("kind", "model" if call is None else "tool"),
                name=record.get("name", ""),
                seconds=spent.get((turn, call)),
                bytes=sizes[sk],
                retries=failed.get((turn, call), 0),
            )
            if row.kind == "model":
                usage = result.get("usage") or {}
                row.input_tokens = int(usage.get("inputTokens", 0))
                row.output_tokens = int(usage.get("outputTokens", 0))
                row.result = _model_result(result)
            else:
                row.result = str(result.get("status", ""))
                row.offloaded_bytes = offloaded_bytes(result)
                if effects is not None:
                    row.effect = effects.get(row.name)
            rows.append(row)
        elif sk.startswith(PARKED_PREFIXES):
            rows.append(_parked_row(sk, record, sizes[sk], now))
    for request in requests:
        rows.append(_approval_row(request, sizes.get(keys.approval_key(request["turn"], request["call"]), 0), now))
    _place_waits(rows, steps)
    # Turns run one after the other: a turn's rows in call order, each call's wait for a human
    # or an event before its step (approval request times are kept to the second).
    return sorted(rows, key=lambda r: (r.turn, -1 if r.call is None else r.call, _RANK.get(r.kind, 3), r.at))


def is_effect(row: TimelineEntry, records: dict[str, dict[str, Any]]) -> bool:
    """Whether a tool row had an external effect (its effect class, else an intent marker or an approval)."""
    if row.effect is not None:
        return row.effect != "read"
    call = row.call if row.call is not None else 0
    return keys.intent_key(row.turn, call) in records or keys.approval_key(row.turn, call) in records


def _model_result(result: dict[str, Any]) -> str:
    from longstep.messages import tool_uses

    names = [u.get("name", "?") for u in tool_uses(result.get("message") or {"content": []})]
    text = str(result.get("stop_reason", ""))
    return f"{text}: {', '.join(names)}" if names else text


def _parked_row(sk: str, record: dict[str, Any], size: int, now: float) -> TimelineEntry:
    key = keys.parse(sk)
    kind = key.kind
    status = record.get("status", "")
    waiting = status in WAITING_RECORD_STATUSES
    if kind == "signal":
        turn, call = 0, None
        name = key.event or ""
        start = record.get("requested_at") or record.get("signaled_at") or 0
        end = record.get("consumed_at")
        kind = "wait"
        result = status
    else:
        turn, call = turn_call_of(sk)
        start = record.get("requested_at", 0)
        end = record.get("decided_at")
        decision = json_value(record.get("decision")) or {}
        name = f"{record.get('task', '')} {record.get('error', '')}".strip()
        result = "pending" if waiting else str(decision.get("action", status))
    seconds = (now if waiting else float(end or start)) - float(start) if start else None
    return TimelineEntry(at=float(start), turn=turn, call=call, kind=kind, name=name, seconds=seconds, bytes=size, result=result)


def _place_waits(rows: list[TimelineEntry], steps: dict[str, Any]) -> None:
    """Give each signal wait the turn and call of the latest ``wait_for`` on its event."""
    from longstep.messages import tool_uses

    calls: dict[str, tuple[int, int]] = {}
    for sk in sorted(steps):
        if sk.endswith("#model"):
            turn, _ = turn_call_of(sk)
            for index, use in enumerate(tool_uses((steps[sk] or {}).get("message") or {"content": []})):
                event = (use.get("input") or {}).get("event") if use.get("name") == "wait_for" else None
                if isinstance(event, str):
                    calls[event] = (turn, index)
    for row in rows:
        if row.kind == "wait" and row.name in calls:
            row.turn, row.call = calls[row.name]


def _approval_row(request: dict[str, Any], size: int, now: float) -> TimelineEntry:
    """A row for one approval request (a view from ``longstep.humans.requests``)."""
    start = from_iso(request.get("requested_at"))
    waiting = request.get("status") == APPROVAL_PENDING
    end = now if waiting else from_iso(request.get("decided_at") or request.get("expires_at")) or now
    return TimelineEntry(
        at=start,
        turn=int(request["turn"]),
        call=int(request["call"]),
        kind="approval",
        name=str(request.get("tool", "")),
        seconds=max(0.0, end - start) if start else None,
        bytes=size,
        result=str(request.get("status", "")),
    )
