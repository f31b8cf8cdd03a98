"""Where a running run stands: what it waits for (an escalation, an approval, an event or a
timer), read from its parked records and latest steps, else its latest step."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any, Callable

from longstep import keys
from longstep.humans import signals
from longstep.store import CheckpointStore
from longstep_kit.ops.views.history import Execution
from longstep_kit.ops.views.records import WAITING_RECORD_STATUSES, from_iso, json_value, turn_call_of
from longstep_kit.ops.views.status import ESCALATED, WAITING_FOR_APPROVAL, WAITING_FOR_EVENT


def waiting_on(
    store: CheckpointStore, dynamodb: Any, table: str, run_id: str, pending_approvals: Callable[[], list[dict[str, Any]]]
) -> tuple[str, float, str] | None:
    """What a running run waits for, from its parked records: ``(status, since, detail)``.

    An escalation comes first (nothing moves until a human answers it), then approvals, then
    event waits (signals) and timers. None when it waits for nothing.

    Args:
        store: the checkpoint store.
        dynamodb: the DynamoDB client.
        table: the checkpoint table's name.
        run_id: the run.
        pending_approvals: the run's pending approval requests, read only when no escalation waits.
    """
    escalations = _parked(store, run_id, "escalation#")
    if escalations:
        first = min(escalations, key=lambda r: r.get("requested_at", 0))
        turn, call = turn_call_of(first["sk"])
        where = first.get("task") or "step"
        where += f" turn {turn}" + ("" if call is None else f" call {call} ({first.get('tool')})")
        why = ": ".join(str(p) for p in (first.get("error"), first.get("reason")) if p)
        return ESCALATED, float(first.get("requested_at", 0)), f"{where}: {why}"[:300]
    pending = pending_approvals()
    if pending:
        first = pending[0]
        more = f" (+{len(pending) - 1} more)" if len(pending) > 1 else ""
        detail = f"{first['tool']} (turn {first['turn']}, call {first['call']}){more}"
        return WAITING_FOR_APPROVAL, from_iso(first.get("requested_at")), detail
    heads = [item for item in store.query_prefix(run_id, "signal#") if item.get("status") in WAITING_RECORD_STATUSES]
    if heads:
        first = min(heads, key=lambda r: r.get("requested_at", 0))
        event = keys.parse(first["sk"]).event
        parked = signals.waiters(first)  # each parked wait's slot, token and match (never shown)
        match = (parked[0][2] if parked else json_value(first.get("match"))) or {}
        return WAITING_FOR_EVENT, float(first.get("requested_at", 0)), f"event {event}" + (f" matching {json.dumps(match)}" if match else "")
    timer = _timer(store, dynamodb, table, run_id)
    if timer is not None:
        return timer
    return None


def progress(dynamodb: Any, table: str, run_id: str, execution: Execution) -> str:
    """A running run's latest recorded step, for a run that waits for nothing."""
    # The newest records may be a snapshot and a summary of the turn under way.
    items = [i for i in _latest_steps(dynamodb, table, run_id, limit=3) if keys.parse(i["sk"]["S"]).is_step]
    if not items:
        return f"execution {execution.name}, no step recorded yet"
    sk = items[0]["sk"]["S"]
    turn, call = turn_call_of(sk)
    name = items[0].get("name", {}).get("S", "")
    step = f"turn {turn} {name}" if call is None else f"turn {turn} call {call} {name}"
    return f"execution {execution.name}, last step {step}"


def _parked(store: CheckpointStore, run_id: str, prefix: str) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in item.items() if k != "task_token" and not k.startswith(signals.WAITER_PREFIX)}
        for item in store.query_prefix(run_id, prefix)
        if item.get("status") in WAITING_RECORD_STATUSES
    ]


def _latest_steps(dynamodb: Any, table: str, run_id: str, limit: int = 50) -> list[dict[str, Any]]:
    resp = dynamodb.query(
        TableName=table,
        KeyConditionExpression="#pk = :pk AND begins_with(#sk, :prefix)",
        ExpressionAttributeNames={"#pk": "pk", "#sk": "sk"},
        ExpressionAttributeValues={":pk": {"S": run_id}, ":prefix": {"S": keys.STEP_PREFIX}},
        ScanIndexForward=False,
        Limit=limit,
        ConsistentRead=True,
    )
    return resp.get("Items", [])


def _timer(store: CheckpointStore, dynamodb: Any, table: str, run_id: str) -> tuple[str, float, str] | None:
    """A ``wait_for`` timer: the latest reply asked for one and its result is not recorded."""
    from longstep.messages import tool_uses
    from longstep.tools.builtins import WAIT_FOR, WaitForArgs

    items = _latest_steps(dynamodb, table, run_id)
    model = next((i for i in items if i["sk"]["S"].endswith("#model")), None)
    if model is None:
        return None
    turn = keys.parse(model["sk"]["S"]).turn
    recorded = {k.call for k in (keys.parse(i["sk"]["S"]) for i in items) if k.kind == keys.TOOL and k.turn == turn}
    step = store.get_step(run_id, model["sk"]["S"])
    if step is None:
        return None
    at = float(model.get("recorded_at", {}).get("N", 0))
    for index, use in enumerate(tool_uses(step.result.get("message", {}))):
        if use.get("name") != WAIT_FOR or index in recorded:
            continue
        try:
            args = WaitForArgs.model_validate(use.get("input"))
        except ValueError:
            continue
        if args.event is None:
            until = args.timer_until(dt.datetime.fromtimestamp(step.result.get("at", at), dt.timezone.utc))
            return WAITING_FOR_EVENT, at, f"timer until {until} (turn {turn}, call {index})"
    return None
