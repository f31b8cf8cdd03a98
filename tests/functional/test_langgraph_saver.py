"""``LongstepSaver`` beyond the conformance suite: what its reads cost, large values in S3, delta
channels' history in a few requests, a prune that keeps what a delta channel is rebuilt from."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from uuid import uuid4

import boto3
import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from moto import mock_aws

from longstep.errors import RecordTooLargeError
from longstep.langgraph import LongstepSaver

TABLE, BUCKET = "checkpoints", "artifacts"


@pytest.fixture
def aws():
    with mock_aws():
        dynamodb, s3 = boto3.client("dynamodb"), boto3.client("s3")
        LongstepSaver.create_table(dynamodb, TABLE)
        s3.create_bucket(Bucket=BUCKET)
        yield dynamodb, s3


def _counting(client) -> Counter:
    calls: Counter = Counter()
    client.meta.events.register("before-call.*.*", lambda model, **_: calls.update([model.name]))
    return calls


def _checkpoint(values: dict, versions: dict) -> dict:
    cp = empty_checkpoint()
    cp.update(v=1, channel_values=values, channel_versions=versions)
    return cp


def _chain(saver, thread: str, steps: int, *, snapshot_every: int | None = None) -> list[dict]:
    """A thread like a delta channel's: ``msgs`` stored every ``snapshot_every`` steps, a write each step."""
    configs, parent = [], None
    for step in range(steps):
        config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        if parent:
            config["configurable"]["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
        snap = snapshot_every is not None and step % snapshot_every == 0
        cp = _checkpoint({"msgs": _DeltaSnapshot(list(range(step)))} if snap else {}, {"msgs": step + 1})
        parent = saver.put(config, cp, {"source": "loop", "step": step}, {"msgs": step + 1} if snap else {})
        saver.put_writes(parent, [("msgs", step)], str(uuid4()))
        configs.append(parent)
    return configs


def _grow(saver, thread: str, steps: int, *, parent=None, start: int = 0) -> dict:
    """Checkpoints whose ``messages`` list grows by one a step (as ``add_messages`` makes them), and a string channel."""
    for step in range(start, start + steps):
        config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        if parent:
            config["configurable"]["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
        version = saver.get_next_version(None if step == 0 else f"{step:032}.0", None)
        versions = {"messages": version, "status": version}
        values = {"messages": [f"message {n}" for n in range(step + 1)], "status": f"step {step}"}
        parent = saver.put(config, _checkpoint(values, versions), {"step": step}, versions)
        saver.put_writes(parent, [("messages", "w"), ("other", 1)], f"task-{step}")
    return parent


def test_reading_a_checkpoint_costs_the_same_requests_however_long_the_thread(aws):
    dynamodb, _ = aws
    saver = LongstepSaver(TABLE, dynamodb=dynamodb, snapshot_every=20)
    _grow(saver, "t", 60)
    calls = _counting(dynamodb)
    latest = LongstepSaver(TABLE, dynamodb=dynamodb).get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ""}})
    assert latest.metadata["step"] == 59 and latest.checkpoint["channel_values"] == {
        "messages": [f"message {n}" for n in range(60)],
        "status": "step 59",
    }
    assert len(latest.pending_writes) == 2
    # The checkpoint and its writes, its values, and the list's items back to its last whole copy.
    assert calls == Counter(Query=2, BatchGetItem=1), calls
    calls.clear()
    older = saver.get_tuple(latest.parent_config)
    assert older.metadata["step"] == 58 and older.checkpoint["channel_values"]["messages"][-1] == "message 58"
    assert sum(calls.values()) == 3, calls


def test_a_growing_list_is_stored_as_what_each_step_adds(aws):
    dynamodb, _ = aws
    saver = LongstepSaver(TABLE, dynamodb=dynamodb, snapshot_every=20)
    head = _grow(saver, "t", 60)
    blobs = [i for i in dynamodb.scan(TableName=TABLE)["Items"] if i["sk"]["S"].startswith("b#") and "messages" in i["sk"]["S"]]
    whole = [i for i in blobs if "db" not in i]
    assert len(blobs) == 60 and len(whole) == 3  # steps 0, 21 and 42: every 20 extensions a whole copy
    # A fork from an older checkpoint writes its list whole, and both branches read back right.
    fork_parent = saver.list({"configurable": {"thread_id": "t"}}, limit=30)
    old = list(fork_parent)[-1]
    forked = _grow(saver, "t", 1, parent=old.config, start=old.metadata["step"] + 1)
    assert saver.get_tuple(forked).checkpoint["channel_values"]["messages"] == [f"message {n}" for n in range(old.metadata["step"] + 2)]
    assert saver.get_tuple(head).checkpoint["channel_values"]["messages"] == [f"message {n}" for n in range(60)]
    # A new saver (another process) has no hashes: its first write of the list is whole.
    other = LongstepSaver(TABLE, dynamodb=dynamodb)
    _grow(other, "t", 1, parent=head, start=60)
    newest = [i for i in dynamodb.scan(TableName=TABLE)["Items"] if i["sk"]["S"].startswith("b#") and "messages" in i["sk"]["S"]]
    assert len([i for i in newest if "db" not in i]) == 5
    # Prune keeps the newest checkpoint and the items its list is read from.
    saver.prune(["t"])
    assert saver.get_tuple({"configurable": {"thread_id": "t"}}).checkpoint["channel_values"]["messages"] == [f"message {n}" for n in range(61)]
    _grow(saver, "p", 10)
    saver.prune(["p"])
    kept = [
        i["sk"]["S"]
        for i in dynamodb.query(TableName=TABLE, KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "lg#p"}})["Items"]
    ]
    assert len([sk for sk in kept if sk.startswith("b#") and "messages" in sk]) == 10  # the newest and the nine it extends
    assert saver.get_tuple({"configurable": {"thread_id": "p"}}).checkpoint["channel_values"]["messages"] == [f"message {n}" for n in range(10)]


def test_a_large_value_goes_to_s3_compressed_and_comes_back(aws):
    dynamodb, s3 = aws
    saver = LongstepSaver(TABLE, dynamodb=dynamodb, bucket=BUCKET, s3=s3)
    big = "".join(f"line {n}: {uuid4()}\n" for n in range(20_000))  # ~1 MB, half that compressed: over the item limit
    config = saver.put({"configurable": {"thread_id": "big", "checkpoint_ns": ""}}, _checkpoint({"doc": big}, {"doc": 1}), {}, {"doc": 1})
    assert saver.get_tuple(config).checkpoint["channel_values"]["doc"] == big
    objects = s3.list_objects_v2(Bucket=BUCKET)["Contents"]
    assert len(objects) == 1 and objects[0]["Size"] < len(big) * 0.6
    saver.delete_thread("big")
    assert s3.list_objects_v2(Bucket=BUCKET).get("Contents", []) == []
    assert saver.get_tuple({"configurable": {"thread_id": "big", "checkpoint_ns": ""}}) is None


def test_a_value_over_the_item_limit_without_a_bucket_is_refused_before_anything_is_written(aws):
    dynamodb, _ = aws
    saver = LongstepSaver(TABLE, dynamodb=dynamodb)
    noise = os.urandom(640_000)  # incompressible: over the item limit as it is
    with pytest.raises(RecordTooLargeError, match="needs S3"):
        saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, _checkpoint({"doc": noise}, {"doc": 1}), {}, {"doc": 1})
    assert dynamodb.scan(TableName=TABLE)["Count"] == 0


def test_delta_channel_history_reads_a_few_pages_not_one_request_per_ancestor(aws):
    dynamodb, _ = aws
    saver = LongstepSaver(TABLE, dynamodb=dynamodb)
    configs = _chain(saver, "delta", 120, snapshot_every=50)
    calls = _counting(dynamodb)
    history = saver.get_delta_channel_history(config=configs[-1], channels=["msgs"])
    assert history["msgs"]["seed"].value == list(range(100))  # the snapshot at step 100
    assert [w[2] for w in history["msgs"]["writes"]] == list(range(100, 119))  # the head's own write is pending
    assert sum(calls.values()) <= 3, calls  # a Query page, the seed's BatchGetItem, its list's Query
    # The snapshot at step 100 is stored as the 50 messages it adds to the one at step 50.
    extending = [i for i in dynamodb.scan(TableName=TABLE)["Items"] if "dw" in i]
    assert [int(i["dn"]["N"]) for i in extending] == [50]
    # The base class's walk: a get_tuple per ancestor (here a Query each: they hold no value).
    calls.clear()
    assert BaseCheckpointSaver.get_delta_channel_history(saver, config=configs[-1], channels=["msgs"])["msgs"]["writes"] == history["msgs"]["writes"]
    assert sum(calls.values()) >= 20


def test_prune_keeps_the_ancestors_a_delta_channel_is_rebuilt_from(aws):
    dynamodb, _ = aws
    saver = LongstepSaver(TABLE, dynamodb=dynamodb)
    configs = _chain(saver, "delta", 12, snapshot_every=5)  # stored at steps 0, 5 and 10
    before = saver.get_delta_channel_history(config=configs[-1], channels=["msgs"])
    saver.prune(["delta"], strategy="keep_latest")
    kept = [t.metadata["step"] for t in saver.list({"configurable": {"thread_id": "delta"}})]
    assert kept == [11, 10]  # the newest, and its ancestor back to the stored value
    assert saver.get_delta_channel_history(config=configs[-1], channels=["msgs"]) == before


def test_the_saver_may_share_longsteps_checkpoint_table_without_touching_runs(aws):
    dynamodb, _ = aws
    dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": "run-1"}, "sk": {"S": "run"}})
    saver = LongstepSaver(TABLE, dynamodb=dynamodb)
    _chain(saver, "run-1", 2)
    saver.delete_thread("run-1")
    assert dynamodb.scan(TableName=TABLE)["Items"] == [{"pk": {"S": "run-1"}, "sk": {"S": "run"}}]


def test_importing_longstep_needs_no_langgraph():
    code = "import sys, longstep; longstep.Agent; print(sorted(m for m in sys.modules if m.startswith('langgraph') or m.startswith('langchain')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip() == "[]"


def test_the_docs_example_saver_resumes_a_thread_from_another_process(aws):
    from tests.unit.test_examples import load_example

    example = load_example("examples/langgraph/checkpointer.py")
    saver = example.make_saver(TABLE, BUCKET)
    assert saver.rows.ttl_seconds is None and saver.rows.offload.bucket == BUCKET
    first = saver.put(
        {"configurable": {"thread_id": "chat", "checkpoint_ns": ""}}, _checkpoint({"messages": ["hi"]}, {"messages": 1}), {"step": 0}, {"messages": 1}
    )
    # Another process (a new saver, new clients) finds the thread's newest checkpoint.
    found = example.make_saver(TABLE, BUCKET).get_tuple({"configurable": {"thread_id": "chat"}})
    assert found.config == first and found.checkpoint["channel_values"] == {"messages": ["hi"]}
    timed = LongstepSaver(TABLE, dynamodb=saver.table.client, ttl_days=90)
    timed.put({"configurable": {"thread_id": "timed", "checkpoint_ns": ""}}, _checkpoint({}, {}), {}, {})
    (item,) = timed.table.client.query(TableName=TABLE, KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "lg#timed"}})[
        "Items"
    ]
    assert 89 * 86_400 < int(item["expires_at"]["N"]) - time.time() <= 90 * 86_400  # TTL: 90 days after the write


def test_the_docs_example_graph_keeps_a_conversation_across_invocations(aws):
    pytest.importorskip("langgraph.graph", reason="the langgraph package (the bench extra) runs the example's graph")
    from tests.unit.test_examples import load_example

    example = load_example("examples/langgraph/checkpointer.py")
    graph = example.chat_graph(example.make_saver(TABLE, BUCKET))
    assert example.talk(graph, "t1", "hello") == ["hello", "you said: hello"]
    again = example.chat_graph(example.make_saver(TABLE, BUCKET))  # a cold start: only the table remembers
    assert example.talk(again, "t1", "bye") == ["hello", "you said: hello", "bye", "you said: bye"]


def test_namespaces_and_channels_with_the_separator_in_their_names_stay_apart(aws):
    dynamodb, _ = aws
    saver = LongstepSaver(TABLE, dynamodb=dynamodb)
    for ns in ("a", "a#b", "a%23b"):
        config = {"configurable": {"thread_id": "t", "checkpoint_ns": ns}}
        stored = saver.put(config, _checkpoint({"x#y": ns, "x": [ns]}, {"x#y": 1, "x": 1}), {"ns": ns}, {"x#y": 1, "x": 1})
        saver.put_writes(stored, [("x#y", f"write {ns}")], "task#1")
    for ns in ("a", "a#b", "a%23b"):
        found = list(saver.list({"configurable": {"thread_id": "t", "checkpoint_ns": ns}}))
        assert [t.metadata["ns"] for t in found] == [ns]
        assert found[0].checkpoint["channel_values"] == {"x#y": ns, "x": [ns]}
        assert found[0].pending_writes == [("task#1", "x#y", f"write {ns}")]
    assert len(list(saver.list({"configurable": {"thread_id": "t"}}))) == 3  # every namespace


def test_the_async_methods_run_puts_of_many_threads_at_once(aws):
    import asyncio

    dynamodb, _ = aws
    saver = LongstepSaver(TABLE, dynamodb=dynamodb)

    async def thread(n: int) -> list[str]:
        parent = None
        for step in range(5):
            config = {"configurable": {"thread_id": f"t{n}", "checkpoint_ns": ""}}
            if parent:
                config["configurable"]["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
            version = saver.get_next_version(None if step == 0 else f"{step:032}.0", None)
            parent = await saver.aput(config, _checkpoint({"m": list(range(step + 1))}, {"m": version}), {"step": step}, {"m": version})
        return (await saver.aget_tuple({"configurable": {"thread_id": f"t{n}"}})).checkpoint["channel_values"]["m"]

    async def everything() -> list:
        return await asyncio.gather(*(thread(n) for n in range(8)))

    assert asyncio.run(everything()) == [list(range(5))] * 8
