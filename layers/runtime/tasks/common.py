"""What several tasks read: the run record, the tool use a call item names, the task token; and
the renewal of a live run's records (DynamoDB TTL) so none expires while the run needs it."""

from __future__ import annotations

import datetime as dt
from typing import Any, Iterable, Mapping

from longstep import clock, keys, outputs
from longstep.claims import is_claim
from longstep.store import FLOOR_ATTRIBUTE, Condition, StepRecord, step_record
from longstep.errors import InvalidInputError, NonDeterminismError, StepRecordLostError
from longstep.contract.call import CallItem
from longstep.contract.run import RunRecord
from longstep.messages import tool_uses
from longstep.runtime import Runtime
from longstep.settings import WaitTimeouts


def load_run(rt: Runtime, run_id: str) -> RunRecord:
    """The run record, decoded (``longstep.contract.run.RunRecord``).

    Raises:
        InvalidInputError: no run with this id.
    """
    return _decoded_run(rt, run_id, rt.store.get(run_id, keys.RUN_RECORD))


def load_run_and_call(rt: Runtime, item: CallItem) -> tuple[RunRecord, dict[str, Any]]:
    """``load_run`` and ``tool_use`` in one request: the run record and the turn's recorded reply
    are read together (BatchGetItem), both strongly consistent, so the run's steering fields are
    as fresh as ``load_run``'s.

    Raises:
        InvalidInputError: no run with this id, or the turn has fewer calls.
        StepRecordLostError, NonDeterminismError: as ``tool_use``.
    """
    reply_key = keys.model_step_key(item.turn)
    found = rt.store.get_many(item.run_id, [keys.RUN_RECORD, reply_key])
    run = _decoded_run(rt, item.run_id, found.get(keys.RUN_RECORD))
    reply = found.get(reply_key)
    return run, _use_of(item, step_record(reply) if reply and not is_claim(reply) else None)


def _decoded_run(rt: Runtime, run_id: str, item: dict[str, Any] | None) -> RunRecord:
    if item is None:
        raise InvalidInputError(f"run_id: no run named {run_id!r}")
    record = RunRecord.from_dict(item)
    rt.events.known(run_id)
    # Whatever this invocation writes for the run lives at least as long as the run's records.
    rt.store.hold(run_id, record.outputs.kept_until)
    # A repeated tool result this invocation records may reference a record a cold load reads.
    rt.store.share_from(run_id, outputs.floor(record), record.outputs.identity)
    return record


def hold_floor(rt: Runtime, run_id: str) -> None:
    """Give the store the run's expiry floor, for a task that writes but needs nothing else of the
    run record (a run that does not exist has none)."""
    item = rt.store.get(run_id, keys.RUN_RECORD)
    if item is not None:
        rt.store.hold(run_id, RunRecord.from_dict(item).outputs.kept_until)


def tool_use(rt: Runtime, item: CallItem) -> dict[str, Any]:
    """The tool use ``item`` names, read from its turn's recorded model reply.

    Raises:
        InvalidInputError: the turn has no recorded reply, or fewer calls.
        NonDeterminismError: the recorded call is of another tool.
    """
    return _use_of(item, rt.store.get_step(item.run_id, keys.model_step_key(item.turn)))


def _use_of(item: CallItem, reply: StepRecord | None) -> dict[str, Any]:
    if reply is None:  # a call item exists only once its turn's reply was recorded: it is gone
        raise StepRecordLostError(f"turn: the model reply of turn {item.turn} of run {item.run_id} is missing (expired or removed)")
    uses = tool_uses(reply.result["message"])
    if item.call >= len(uses):
        raise InvalidInputError(f"call: turn {item.turn} has {len(uses)} tool calls, not {item.call + 1}")
    use = uses[item.call]
    if use["name"] != item.tool:
        raise NonDeterminismError(f"call {item.call} of turn {item.turn} is {use['name']}, not {item.tool}")
    return use


# The run record's field: every record of the run, written or to be written, expires no earlier
# than this (epoch seconds). ``load_run`` hands it to the store, which writes new records with it.
KEPT_UNTIL = FLOOR_ATTRIBUTE
# Time for the tasks after a wait (CallTool, the next ModelTurn) to run before anything expires.
RENEWAL_SLACK_SECONDS = 86_400
# The sort keys of a run's records all lie in this range (printable ASCII: "run", "step#..."...).
_ALL_KEYS = ("!", "~")


def keep_records(rt: Runtime, run_id: str, run: RunRecord, horizon_seconds: float = 0) -> bool:
    """Make every record of a live run, those written later included, outlive ``horizon_seconds``
    from now (and half the retention).

    Records are written with a TTL of ``retention_days`` after their write; a run that lives longer
    (or waits longer) than that would lose its first records while it still replays them. The run
    record keeps the earliest expiry any record of the run may have (``kept_until``); when that is
    too soon, every record's TTL is moved to ``now + max(retention, horizon) + a day`` and
    ``kept_until`` to the same instant, which the store gives every record written after (the
    tasks read the run record first: ``load_run``). So the renewal runs about once per half
    retention, or before a wait longer than that, and costs one UpdateItem per record then; most
    calls only compare two numbers.

    The renewal that matters runs in ModelTurn, before the turn's calls start, with the longest
    wait any of them may make (``turn_horizon``): nothing else writes the run's records then, so
    no record written during the turn can miss the new floor. The tasks that park later
    (approvals, event waits, delegations, escalations) call this again with their own timeout, a
    check that renews only when the run outlived what its turn planned for.

    Args:
        run: the run record as loaded (``load_run``).
        horizon_seconds: how long the run may now go without another task (its longest wait).

    Returns:
        Whether the records were renewed.
    """
    store = rt.store
    retention = store.retention_seconds
    now = clock.now()
    kept = run.outputs.kept_until or ((run.created_at or now) + retention)
    if kept >= now + max(horizon_seconds, retention / 2):
        return False
    ttl = keys.checkpoint_table().ttl_attribute
    sort_key = keys.checkpoint_table().sort_key
    expiry = int(now + max(retention, horizon_seconds) + RENEWAL_SLACK_SECONDS)
    # The floor first: a record this invocation writes from here on gets it too.
    store.hold(run_id, expiry)
    store.update(run_id, keys.RUN_RECORD, {KEPT_UNTIL: expiry}, when=Condition(exists=True))
    run.held_until(expiry)  # a second call in this invocation sees the renewal
    for record in store.query_between(run_id, *_ALL_KEYS):
        if float(record.get(ttl) or 0) < expiry:  # a record deleted meanwhile stays deleted
            store.update(run_id, record[sort_key], {ttl: expiry}, when=Condition(exists=True))
    return True


def turn_horizon(calls: Iterable[Mapping[str, Any]], timeouts: WaitTimeouts) -> float:
    """The longest a turn's calls may keep the run from its next ModelTurn, in seconds from now.

    Each call may wait (an approval, one of ``wait_for``'s waits, a child run) and then escalate
    in CallTool; the next ModelTurn may escalate too. So a call's horizon is its wait plus two
    escalations, and a turn's is its longest call's (two escalations for a turn with no calls).
    """
    now = clock.now()
    longest = 0.0
    # The turn's call items as ModelTurn built them (a test may give only the fields read here).
    for call in (CallItem.model_construct(**call) for call in calls):
        wait = 0.0
        if call.approval:
            wait = float(timeouts.approval)
        elif call.wait in ("event", "condition"):
            wait = float(call.timeout_seconds or 0)
        elif call.wait == "subagent":
            wait = float(timeouts.subagent)
        elif call.wait == "timer" and call.wait_until:
            until = dt.datetime.fromisoformat(call.wait_until.replace("Z", "+00:00"))
            if until.tzinfo is None:
                until = until.replace(tzinfo=dt.timezone.utc)
            wait = until.timestamp() - now
        longest = max(longest, wait)
    return longest + 2 * timeouts.escalation


def keep_for_wait(rt: Runtime, run_id: str, run: RunRecord, wait_seconds: float) -> bool:
    """``keep_records`` for a task about to park for up to ``wait_seconds`` (and two escalations after)."""
    return keep_records(rt, run_id, run, wait_seconds + 2 * rt.settings.wait_timeouts.escalation)
