"""The run's expiry floor (issue 24): a record written after a turn's renewal, in the same turn,
expires no earlier than the records the renewal kept; and a turn's horizon counts every wait its
calls may start (approvals, ``wait_for``, child runs) and the escalations after."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

from longstep.events import Emitter

import pytest

from longstep import clock, keys
from longstep.inmemory import InMemoryStore
from longstep.settings import SettingsError, WaitTimeouts
from longstep.tasks.common import KEPT_UNTIL, keep_records, load_run, turn_horizon

DAY = 86_400
T0 = 1_800_000_000.0
TTL = keys.checkpoint_table().ttl_attribute
TIMEOUTS = WaitTimeouts(approval=7 * DAY, escalation=7 * DAY, subagent=300 * DAY)


def _runtime(store: InMemoryStore) -> SimpleNamespace:
    return SimpleNamespace(store=store, settings=SimpleNamespace(wait_timeouts=TIMEOUTS), events=Emitter(None))


def _expiry(store: InMemoryStore, run_id: str, sk: str) -> int:
    return int(store.items(run_id)[sk][TTL]["N"])


def _new_run(store: InMemoryStore) -> None:
    store.put_once("r", keys.RUN_RECORD, {"agent": "a", "goal": "g", "model": "{}", "max_turns": 5, "created_at": T0})


def test_a_record_written_after_the_renewal_gets_the_runs_floor():
    store = InMemoryStore(retention_days=90)
    rt = _runtime(store)
    with clock.use_source(lambda: T0):
        _new_run(store)
        store.record_step("r", keys.model_step_key(0), "model", "converse", {"message": {}})
        assert keep_records(rt, "r", load_run(rt, "r"), 335 * DAY)
        floor = store.get("r", keys.RUN_RECORD)[KEPT_UNTIL]
        assert floor >= T0 + 335 * DAY
    # A later invocation of the same turn (CallTool: a new store, as each invocation builds one).
    later = InMemoryStore(retention_days=90)
    later._items = store._items  # the same table, seen by a store that knows no floor yet
    rt_later = _runtime(later)
    with clock.use_source(lambda: T0 + 60):
        load_run(rt_later, "r")
        later.record_step("r", keys.tool_step_key(0, 0), "tool", "send_email", {"status": "success"})
        later.update("r", keys.signal_key("review"), {"status": "waiting"}, expires=True)
    # Before issue 24 this record kept the 90-day default and expired 245 days into the wait.
    assert _expiry(later, "r", keys.tool_step_key(0, 0)) >= floor
    assert _expiry(later, "r", keys.signal_key("review")) >= floor
    assert _expiry(later, "r", keys.model_step_key(0)) >= floor


def test_without_a_floor_records_expire_a_retention_after_their_write():
    store = InMemoryStore(retention_days=90)
    with clock.use_source(lambda: T0):
        store.record_step("r", keys.model_step_key(0), "model", "converse", {})
    assert _expiry(store, "r", keys.model_step_key(0)) == int(T0) + 90 * DAY


def test_a_turns_horizon_counts_each_kind_of_wait_and_two_escalations():
    with clock.use_source(lambda: T0):
        assert turn_horizon([], TIMEOUTS) == 14 * DAY
        assert turn_horizon([{"approval": True, "wait": "none"}], TIMEOUTS) == 21 * DAY
        assert turn_horizon([{"wait": "event", "timeout_seconds": 40 * DAY}], TIMEOUTS) == 54 * DAY
        assert turn_horizon([{"wait": "condition", "timeout_seconds": 50 * DAY}], TIMEOUTS) == 64 * DAY
        # Before issue 24 a child run's wait counted as nothing.
        assert turn_horizon([{"wait": "subagent", "subagent": "research"}, {"wait": "none"}], TIMEOUTS) == 314 * DAY
        until = clock.now_utc().replace(microsecond=0).timestamp() + 100 * DAY
        stamp = dt.datetime.fromtimestamp(until, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        assert turn_horizon([{"wait": "timer", "wait_until": stamp}], TIMEOUTS) == 114 * DAY


def test_wait_timeouts_are_read_from_their_variable_and_refused_when_malformed():
    assert WaitTimeouts.parse(TIMEOUTS.variable()) == TIMEOUTS
    assert WaitTimeouts.parse(None) == WaitTimeouts()
    with pytest.raises(SettingsError, match="LONGSTEP_WAIT_TIMEOUTS"):
        WaitTimeouts.parse('{"subagent": -1}')
