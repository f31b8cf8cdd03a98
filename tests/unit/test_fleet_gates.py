"""Concurrency slots and the shared model rate limit, on moto's DynamoDB (conditional writes and
transactions as DynamoDB applies them). Step Functions is a recorder of the tokens it is handed
(here only the wake-ups are observed; the engine's side is tests/local/test_fleet_gates.py)."""

from __future__ import annotations

import threading

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from longstep import keys
from longstep.concurrency import Slots, key_of, NO_KEY
from longstep.fleet import FleetSettings, RateSettings
from longstep.rate_limit import Buckets


class Tokens:
    """SendTaskSuccess recorder: a token answered twice, or a dead one, is refused as AWS does."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.dead: set[str] = set()
        self.running: set[str] = set()
        self.ended: dict[str, str] = {}  # an execution's status other than RUNNING or ABORTED
        self.lock = threading.Lock()

        class _Exc:
            class ExecutionDoesNotExist(Exception):
                pass

        self.exceptions = _Exc

    def send_task_success(self, taskToken: str, output: str) -> None:  # noqa: N803 - boto3's name
        with self.lock:
            if taskToken in self.dead or taskToken in self.sent:
                raise ClientError({"Error": {"Code": "TaskTimedOut", "Message": "closed"}}, "SendTaskSuccess")
            self.sent.append(taskToken)

    def describe_execution(self, executionArn: str) -> dict:  # noqa: N803
        return {"status": self.ended.get(executionArn, "RUNNING" if executionArn in self.running else "ABORTED")}


@pytest.fixture
def table():
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        ddb.create_table(TableName="cp", **keys.checkpoint_table().create_table_arguments())
        yield ddb


def _slots(ddb, limit: int = 2) -> tuple[Slots, Tokens]:
    sfn = Tokens()
    return Slots(ddb, "cp", sfn, limit), sfn


def _acquire(slots: Slots, sfn: Tokens, run: str, generation: int = 0) -> str:
    arn = f"arn:aws:states:us-east-1:1:execution:m:{run}-{generation}"
    sfn.running.add(arn)
    return slots.acquire("acme", run, arn, f"tok-{run}-{generation}")


def test_a_key_holds_at_its_limit_and_wakes_waiters_in_arrival_order(table):
    slots, sfn = _slots(table, limit=2)
    assert [_acquire(slots, sfn, f"r{i}") for i in range(5)] == ["held", "held", "queued", "queued", "queued"]
    assert sfn.sent == ["tok-r0-0", "tok-r1-0"]
    state = slots.state("acme")
    assert (state["running"], state["holders"], state["waiters"]) == (2, ["r0", "r1"], ["r2", "r3", "r4"])
    assert slots.release("acme", "r1") is True
    assert slots.release("acme", "r1") is False  # idempotent
    assert sfn.sent[-1] == "tok-r2-0" and slots.state("acme")["running"] == 2
    slots.release("acme", "r0")
    assert sfn.sent[-1] == "tok-r3-0"


def test_a_live_limit_wakes_who_now_fits_and_a_lower_one_grants_nobody(table):
    slots, sfn = _slots(table, limit=1)
    for i in range(4):
        _acquire(slots, sfn, f"r{i}")
    slots.set_limit("acme", 3)
    assert slots.state("acme")["holders"] == ["r0", "r1", "r2"]
    slots.set_limit("acme", 1)
    slots.release("acme", "r0")
    assert slots.state("acme")["running"] == 2 and "tok-r3-0" not in sfn.sent


def test_a_retried_or_continued_acquire_keeps_its_slot_and_answers_the_new_token(table):
    slots, sfn = _slots(table, limit=1)
    _acquire(slots, sfn, "r0")
    _acquire(slots, sfn, "r1")
    assert _acquire(slots, sfn, "r0", generation=1) == "held"  # the run's next execution
    assert sfn.sent[-1] == "tok-r0-1" and slots.state("acme")["running"] == 1
    assert _acquire(slots, sfn, "r1", generation=1) == "queued"  # a retried acquire: one place
    assert slots.state("acme")["waiters"] == ["r1"]
    # The old execution's end must not release the slot the next one holds.
    assert slots.release("acme", "r0", execution="arn:aws:states:us-east-1:1:execution:m:r0-0") is False
    slots.release("acme", "r0", execution="arn:aws:states:us-east-1:1:execution:m:r0-1")
    assert sfn.sent[-1] == "tok-r1-1"


def test_a_waiter_whose_execution_ended_gives_its_slot_back_and_the_next_one_gets_it(table):
    slots, sfn = _slots(table, limit=1)
    for i in range(3):
        _acquire(slots, sfn, f"r{i}")
    sfn.dead.add("tok-r1-0")
    sfn.running.discard("arn:aws:states:us-east-1:1:execution:m:r1-0")
    slots.release("acme", "r0")
    assert slots.state("acme")["holders"] == ["r2"] and sfn.sent[-1] == "tok-r2-0"


def test_a_stopped_waiter_leaves_the_queue(table):
    slots, sfn = _slots(table, limit=1)
    for i in range(3):
        _acquire(slots, sfn, f"r{i}")
    assert slots.release("acme", "r1", execution="arn:aws:states:us-east-1:1:execution:m:r1-0") is True
    assert slots.state("acme")["waiters"] == ["r2"]


def test_a_holder_that_ended_unseen_gives_its_slot_to_a_waiter_when_the_key_is_full(table):
    slots, sfn = _slots(table, limit=2)
    _acquire(slots, sfn, "r0"), _acquire(slots, sfn, "r1")
    sfn.running.discard("arn:aws:states:us-east-1:1:execution:m:r0-0")  # ended; its end event was lost
    slots.pump("acme")
    assert slots.state("acme")["holders"] == ["r0", "r1"]  # nobody waits: nothing is asked
    assert _acquire(slots, sfn, "r2") == "held" and sfn.sent[-1] == "tok-r2-0"
    assert slots.state("acme") == {"running": 2, "limit": 2, "holders": ["r1", "r2"], "waiters": []}
    # A live holder stays; the check is recorded, so the next pump asks about another holder first.
    assert _acquire(slots, sfn, "r3") == "queued" and slots.state("acme")["holders"] == ["r1", "r2"]
    checked = {h["run_id"]: h.get("checked_at") for h in slots._query("acme", "holder#")}
    assert all(v is not None for v in checked.values())
    # One that succeeded is handing over to its run's next execution: it keeps its slot.
    sfn.ended["arn:aws:states:us-east-1:1:execution:m:r1-0"] = "SUCCEEDED"
    slots.pump("acme")
    assert slots.state("acme")["holders"] == ["r1", "r2"]


@pytest.fixture
def atomic():
    """moto applies each request atomically, as DynamoDB does (moto alone does not, under threads)."""
    from longstep_kit.local import moto_patches
    from longstep_kit.local.atomicity import make_dynamodb_atomic

    make_dynamodb_atomic()
    yield
    moto_patches.undo_all()


def test_concurrent_acquires_and_releases_never_pass_the_limit(table, atomic):
    slots, sfn = _slots(table, limit=3)
    seen: list[int] = []
    slots.on_wake = lambda key, run: seen.append(slots.state(key)["running"])
    threads = [threading.Thread(target=_acquire, args=(slots, sfn, f"r{i}")) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert slots.state("acme")["running"] == 3 and len(slots.state("acme")["waiters"]) == 9
    for _ in range(12):
        holder = slots.state("acme")["holders"][0]
        slots.release("acme", holder)
    assert max(seen) <= 3 and len(sfn.sent) == 12
    assert slots.state("acme") == {"running": 0, "limit": 3, "holders": [], "waiters": []}


def test_the_key_is_the_run_attribute():
    assert key_of({"tenant": "acme"}, "tenant") == "acme"
    assert key_of({}, "tenant") == NO_KEY


def test_the_bucket_spaces_calls_under_the_quota(table):
    rate = RateSettings(requests_per_minute=30, tokens_per_minute=1_000_000, tokens_per_call=10, burst_seconds=4)
    buckets = Buckets(table, "cp")
    starts = []
    for i in range(40):
        drawn = buckets.draw("m", rate, now=float(i) * 0.5)  # a draw every half second, 120 a minute
        starts.append(i * 0.5 + drawn.wait_seconds)
    for start in starts:
        assert sum(1 for s in starts if start <= s < start + 60) <= 30
    assert starts[0] == 0.0 and starts[-1] > 60  # waits, not refusals


def test_the_token_quota_binds_when_calls_are_large(table):
    rate = RateSettings(requests_per_minute=1000, tokens_per_minute=60_000, tokens_per_call=10_000, burst_seconds=10)
    buckets = Buckets(table, "cp")
    starts = [buckets.draw("m", rate, now=0.0).wait_seconds for _ in range(12)]
    assert sum(1 for s in starts if s < 60) <= 6


def test_a_draw_corrects_the_bucket_with_the_run_s_recorded_usage_once(table):
    from longstep.rate_limit import COUNTED, correction
    from longstep.store import CheckpointStore

    store = CheckpointStore("cp", table)
    store.put("r", keys.RUN_RECORD, {"agent": "a"})
    rate = RateSettings(requests_per_minute=1000, tokens_per_minute=60_000, tokens_per_call=100, burst_seconds=30)
    buckets = Buckets(table, "cp")
    correct = lambda: correction(store, "r", rate.tokens_per_call)  # noqa: E731
    assert buckets.draw("m", rate, now=0.0, correct=correct).tokens_level == 30_000 - 100  # nothing recorded yet
    store.record_step("r", keys.model_step_key(0), keys.MODEL, "converse", {"usage": {"inputTokens": 400, "outputTokens": 100}})
    # Turn 0 used 500, not 100: the next draw takes the 400 more, and counts turn 0 as corrected.
    assert buckets.draw("m", rate, now=0.0, correct=correct).tokens_level == 30_000 - 100 - 400 - 100
    assert store.get("r", keys.RUN_RECORD)[COUNTED] == 1
    assert buckets.draw("m", rate, now=0.0, correct=correct).tokens_level == 30_000 - 600 - 100  # a retried draw: no second correction
    # A reply smaller than the estimate gives back the difference, never past the capacity.
    store.record_step("r", keys.model_step_key(1), keys.MODEL, "converse", {"usage": {"inputTokens": 10, "outputTokens": 0}})
    assert buckets.draw("m", rate, now=0.0, correct=correct).tokens_level == 30_000 - 700 + 90 - 100
    store.record_step("r", keys.model_step_key(2), keys.MODEL, "converse", {"usage": {"inputTokens": 0, "outputTokens": 0}})
    assert buckets.draw("m", rate, now=3600.0, correct=correct).tokens_level == 30_000 - 100


def test_fleet_settings_refuse_a_call_larger_than_the_quota():
    with pytest.raises(ValueError, match="tokens_per_call"):
        RateSettings(requests_per_minute=1, tokens_per_minute=10, tokens_per_call=11)
    assert FleetSettings.from_env({}) == FleetSettings()
