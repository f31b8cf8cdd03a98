"""Schema versions of checkpoint records: old records are upgraded on read, newer ones refused.

``tests/fixtures/records_v1.json`` holds every checkpoint item of two local scenario runs
(triage, wait_for_event) exactly as the runtime wrote them before records carried a schema
version (typed items; binaries as base64), with the transcript hash each run had then.
tests/functional/test_migrations_dynamodb.py runs these tests on DynamoDB (moto) too.
"""

from __future__ import annotations

import base64
import json
import zlib
from pathlib import Path
from typing import Any

import pytest

from longstep import codec, keys
from longstep.contract import migrations
from longstep.inmemory import InMemoryStore
from longstep.messages import transcript_sha256
from longstep.contract.migrations import CURRENT_SCHEMA, SCHEMA_ATTRIBUTE, RecordSchemaError
from longstep.store import Condition
from longstep.transcript import transcript

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "records_v1.json"
V1_RUNS = json.loads(FIXTURE.read_text())


def typed_items(run: str) -> list[dict[str, Any]]:
    """The fixture's items of ``run`` as boto3's low-level client has them (binaries as bytes)."""

    def value(v: dict[str, Any]) -> dict[str, Any]:
        ((kind, raw),) = v.items()
        return {"B": base64.b64decode(raw["base64"])} if kind == "B" else v

    return [{name: value(v) for name, v in item.items()} for item in V1_RUNS[run]["items"]]


def load_into(store: Any, items: list[dict[str, Any]]) -> None:
    """Put typed items into the store's table as they are (no stamping, no encoding)."""
    with store._lock:
        for item in items:
            store._items.setdefault(item["pk"]["S"], {})[item["sk"]["S"]] = item


def stored(store: Any, run_id: str, sk: str) -> dict[str, Any]:
    """The typed item as stored, not as read."""
    return store.items(run_id)[sk]


@pytest.fixture
def store():
    return InMemoryStore("checkpoints")


@pytest.fixture
def raw_put():
    return load_into


@pytest.fixture
def raw_get():
    return stored


def test_the_fixture_is_of_the_previous_format():
    items = [i for run in V1_RUNS for i in typed_items(run)]
    assert len(items) > 30 and not any(SCHEMA_ATTRIBUTE in i for i in items)
    kinds = {keys.parse(i["sk"]["S"]).kind for i in items}
    assert {"run", "final", "model", "tool", "intent", "approval", "signal"} <= kinds


@pytest.mark.parametrize("run", sorted(V1_RUNS))
def test_records_of_the_previous_format_read_as_current_with_the_same_transcript(store, raw_put, run):
    raw_put(store, typed_items(run))
    run_id = f"{run}-v1"
    record = store.get(run_id, keys.RUN_RECORD)
    assert record[SCHEMA_ATTRIBUTE] == CURRENT_SCHEMA
    steps = store.steps(run_id)
    assert steps and all(s.kind in ("model", "tool") for s in steps)
    assert transcript_sha256(transcript({"goal": record["goal"]}, steps)) == V1_RUNS[run]["transcript_sha256"]
    assert all(r[SCHEMA_ATTRIBUTE] == CURRENT_SCHEMA for r in store.query_between(run_id, "a", "z"))
    # Runs started before run records held a code version say so.
    assert record["code_version"] == migrations.UNRECORDED_CODE_VERSION


def _write_every_way(store) -> list[str]:
    """A record of each kind written each way a store writes one; their sort keys."""
    store.put_once("r", "a", {"x": 1})
    store.put("r", "b", {"x": 1})
    store.update("r", "c", {"x": 1})
    store.put_if("r", "d", {"x": 1}, Condition(exists=False))
    store.record_step("r", keys.model_step_key(0), "model", "converse", {"message": {}})
    assert store.claim_step("r", keys.tool_step_key(0, 0), "tool", "read_file", "attempt-1", 2e9) is None
    assert store.complete_step("r", keys.tool_step_key(0, 0), "tool", "read_file", {"content": "x"}, "attempt-1")
    store.put_once("r", keys.summary_key(1), {"summary": "s"})
    return ["a", "b", "c", "d", keys.summary_key(1), keys.model_step_key(0), keys.tool_step_key(0, 0)]


def test_new_records_are_written_with_the_current_version(store, raw_get):
    for sk in _write_every_way(store):
        assert raw_get(store, "r", sk)[SCHEMA_ATTRIBUTE] == {"N": str(CURRENT_SCHEMA)}


def test_while_the_step_format_is_version_1s_a_step_record_carries_no_version(store, raw_get, monkeypatch):
    monkeypatch.setattr(migrations, "STEP_SCHEMA", 1)
    *others, model, tool = _write_every_way(store)
    for sk in others:
        assert raw_get(store, "r", sk)[SCHEMA_ATTRIBUTE] == {"N": str(CURRENT_SCHEMA)}
    for sk in (model, tool):  # absent is version 1, to this code and to every older one
        assert SCHEMA_ATTRIBUTE not in raw_get(store, "r", sk)
        assert migrations.version_of(codec.plain(raw_get(store, "r", sk))) == 1
        assert store.get("r", sk)[SCHEMA_ATTRIBUTE] == CURRENT_SCHEMA
    assert store.get_step("r", tool).result == {"content": "x"} and store.get_step("r", model).result == {"message": {}}


def test_once_the_step_format_changes_step_records_are_stamped_and_refused_by_older_code(store, raw_get, monkeypatch):
    monkeypatch.setattr(migrations, "STEP_SCHEMA", CURRENT_SCHEMA)
    *_, model, tool = _write_every_way(store)
    for sk in (model, tool):
        assert raw_get(store, "r", sk)[SCHEMA_ATTRIBUTE] == {"N": str(CURRENT_SCHEMA)}
    monkeypatch.setattr(migrations, "CURRENT_SCHEMA", CURRENT_SCHEMA - 1)  # the runtime before it
    monkeypatch.setattr(migrations, "STEP_SCHEMA", 1)
    with pytest.raises(RecordSchemaError, match="newer than this code's"):
        store.get_step("r", tool)


def test_a_claim_the_previous_runtime_stamped_is_completed_and_keeps_its_version(store, raw_put, raw_get):
    sk = keys.tool_step_key(3, 0)
    claim = {"pk": {"S": "r"}, "sk": {"S": sk}, "kind": {"S": "tool"}, "name": {"S": "grep"}, "attempt": {"S": "a1"}}
    raw_put(store, [{**claim, "lease_until": {"N": "2000000000"}, SCHEMA_ATTRIBUTE: {"N": "4"}}])
    result = {"status": "success", "content": "src/a.py:3: found it, and found it again " * 3}
    assert store.complete_step("r", sk, "tool", "grep", result, "a1")
    item = raw_get(store, "r", sk)
    assert item[SCHEMA_ATTRIBUTE] == {"N": "4"}
    # Its payload is what version 4 reads: zlib without the dictionary version 5 packs against.
    assert json.loads(zlib.decompress(bytes(item["result_z"]["B"]))) == result
    assert store.get_step("r", sk).result == result
    assert not store.complete_step("r", sk, "tool", "grep", {"content": "again"}, "a1")  # no longer its claim


def test_an_update_keeps_an_old_record_at_its_version_and_returns_it_upgraded(store, raw_put, raw_get):
    raw_put(store, [{"pk": {"S": "r"}, "sk": {"S": "signal#go"}, "status": {"S": "waiting"}}])
    before = store.update("r", "signal#go", {"status": "signaled"}, when=Condition(equal={"status": "waiting"}))
    assert before["status"] == "waiting" and before[SCHEMA_ATTRIBUTE] == CURRENT_SCHEMA
    # The stored item is still version 1 in every other attribute: it keeps no version stamp.
    assert SCHEMA_ATTRIBUTE not in raw_get(store, "r", "signal#go")
    assert store.get("r", "signal#go")["status"] == "signaled"


def test_a_record_of_a_newer_version_is_refused_on_every_read(store, raw_put):
    newer = {"N": str(CURRENT_SCHEMA + 1)}
    raw_put(
        store,
        [
            {
                "pk": {"S": "r"},
                "sk": {"S": keys.model_step_key(0)},
                "kind": {"S": "model"},
                "name": {"S": "converse"},
                "result": {"S": "{}"},
                SCHEMA_ATTRIBUTE: newer,
            }
        ],
    )
    with pytest.raises(RecordSchemaError, match=f"schema version {CURRENT_SCHEMA + 1}, newer than this code's {CURRENT_SCHEMA}"):
        store.get("r", keys.model_step_key(0))
    with pytest.raises(RecordSchemaError):
        store.steps("r")
    with pytest.raises(RecordSchemaError):
        store.get_step("r", keys.model_step_key(0))


def test_an_update_refuses_a_record_of_a_newer_version_and_writes_nothing(store, raw_put, raw_get):
    raw_put(store, [{"pk": {"S": "r"}, "sk": {"S": "signal#go"}, "status": {"S": "waiting"}, SCHEMA_ATTRIBUTE: {"N": str(CURRENT_SCHEMA + 1)}}])
    with pytest.raises(RecordSchemaError, match="newer"):
        store.update("r", "signal#go", {"status": "signaled"})
    assert raw_get(store, "r", "signal#go")["status"] == {"S": "waiting"}


def test_a_failed_condition_on_an_old_record_is_still_a_failed_condition(store, raw_put):
    raw_put(store, [{"pk": {"S": "r"}, "sk": {"S": "signal#go"}, "status": {"S": "consumed"}}])
    assert store.update("r", "signal#go", {"status": "signaled"}, when=Condition(equal={"status": "waiting"})) is None
    assert store.update("r", "absent", {"x": 1}, when=Condition(exists=True)) is None
    assert store.get("r", "signal#go")["status"] == "consumed" and store.get("r", "absent") is None


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_a_malformed_version_is_a_typed_error_naming_the_field(bad):
    with pytest.raises(RecordSchemaError, match=SCHEMA_ATTRIBUTE):
        migrations.upgrade({"pk": "r", "sk": "x", SCHEMA_ATTRIBUTE: bad})


def test_migrators_run_in_order_up_to_the_current_version(monkeypatch):
    monkeypatch.setattr(migrations, "CURRENT_SCHEMA", CURRENT_SCHEMA + 2)
    chain = dict(migrations._migrators)
    chain[CURRENT_SCHEMA] = lambda r: {**r, "trail": r.get("trail", "") + "a"}
    chain[CURRENT_SCHEMA + 1] = lambda r: {**r, "trail": r["trail"] + "b"}
    monkeypatch.setattr(migrations, "_migrators", chain)
    upgraded = migrations.upgrade({"pk": "r", "sk": "x"})
    assert upgraded["trail"] == "ab" and upgraded[SCHEMA_ATTRIBUTE] == CURRENT_SCHEMA + 2


def test_a_missing_migrator_is_an_error_not_a_silent_read(monkeypatch):
    monkeypatch.setattr(migrations, "CURRENT_SCHEMA", CURRENT_SCHEMA + 1)
    with pytest.raises(RecordSchemaError, match=f"no migrator from schema version {CURRENT_SCHEMA}"):
        migrations.upgrade({"pk": "r", "sk": "x", SCHEMA_ATTRIBUTE: CURRENT_SCHEMA})


def test_a_version_has_one_migrator():
    with pytest.raises(ValueError, match="registered twice"):
        migrations.migrator(1)(lambda r: r)
