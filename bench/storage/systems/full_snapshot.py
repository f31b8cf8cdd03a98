"""Baseline: the whole message state (Bedrock Converse messages) stored again at every step.

A step is what a LangGraph superstep is in this loop: the model's reply, then the results of that
turn's tool calls, so a turn with tools writes two snapshots. A snapshot is one DynamoDB item while
it fits DynamoDB's 400 KB item limit; above that its body goes to S3 and the item keeps the key,
as any real system must. Resume reads the newest item (a Query, newest first, Limit 1) and, when
it points to S3, the object.
"""

from __future__ import annotations

import json
from typing import Any

import boto3

from bench.storage import fastmoto
from bench.storage.aws import DYNAMODB_ITEM_LIMIT, Meter, create_table, inventory, item_size
from bench.storage.session import Session

TABLE = "full-snapshots"
BUCKET = "full-snapshots-bench"
RUN_ID = "bench-run"


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def converse_messages(session: Session) -> list[dict[str, Any]]:
    """The session as Converse messages, tool outputs inline (what the model was shown)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"text": session.goal}]}]
    for turn in session.turns:
        content: list[dict[str, Any]] = [{"text": turn.text}]
        content += [{"toolUse": {"toolUseId": c.id, "name": c.name, "input": c.input}} for c in turn.calls]
        messages.append({"role": "assistant", "content": content})
        if turn.calls:
            results = [{"toolResult": {"toolUseId": c.id, "content": [{"text": c.output}], "status": "success"}} for c in turn.calls]
            messages.append({"role": "user", "content": results})
    return messages


def run(session: Session, meter: Meter) -> dict[str, Any]:
    ddb = meter.attach(boto3.client("dynamodb"))
    s3 = meter.attach(boto3.client("s3"))
    create_table(ddb, TABLE, "pk", "sk")
    s3.create_bucket(Bucket=BUCKET)
    fastmoto.keep_recent_bodies(BUCKET)  # GBs of old snapshots: count them, do not keep them

    # The snapshot of step k is the JSON of {"run_id", "step", "messages": first n_k messages};
    # the serialized messages are kept so each snapshot is a join, not a re-serialization.
    parts: list[str] = []
    offloaded = 0

    def write_snapshot(step: int) -> None:
        nonlocal offloaded
        body = '{"run_id":%s,"step":%d,"messages":[%s]}' % (_dumps(RUN_ID), step, ",".join(parts))
        item: dict[str, Any] = {"pk": {"S": RUN_ID}, "sk": {"S": f"snapshot#{step:06d}"}, "state": {"S": body}}
        if item_size(item) > DYNAMODB_ITEM_LIMIT:
            key = f"{RUN_ID}/snapshots/{step:06d}.json"
            data = body.encode("utf-8")
            s3.put_object(Bucket=BUCKET, Key=key, Body=data, ContentType="application/json")
            item = {"pk": {"S": RUN_ID}, "sk": {"S": f"snapshot#{step:06d}"}, "s3_key": {"S": key}, "bytes": {"N": str(len(data))}}
            offloaded += 1
        ddb.put_item(TableName=TABLE, Item=item)

    messages = converse_messages(session)
    parts.append(_dumps(messages[0]))
    step = 0
    cursor = 1
    for turn in session.turns:
        parts.append(_dumps(messages[cursor]))
        cursor += 1
        write_snapshot(step)
        step += 1
        if turn.calls:
            parts.append(_dumps(messages[cursor]))
            cursor += 1
            write_snapshot(step)
            step += 1
    run_reads = meter.snapshot()

    stored = inventory(ddb, s3, [TABLE], [BUCKET])

    meter.reset()
    restored = resume(ddb, s3)
    cost = meter.snapshot()
    if len(restored) != len(messages):
        raise AssertionError(f"full snapshot resume found {len(restored)} messages, expected {len(messages)}")
    return {
        "stored": stored,
        "resume": cost,
        "run_requests": run_reads,
        "details": {"snapshots": step, "snapshots_in_s3": offloaded, "last_state_bytes": len(",".join(parts).encode())},
    }


def resume(ddb: Any, s3: Any) -> list[dict[str, Any]]:
    """Read the newest snapshot: what a resume of this system does."""
    resp = ddb.query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
        ExpressionAttributeValues={":pk": {"S": RUN_ID}, ":p": {"S": "snapshot#"}},
        ScanIndexForward=False,
        Limit=1,
        ConsistentRead=True,
    )
    item = resp["Items"][0]
    if "s3_key" in item:
        body = s3.get_object(Bucket=BUCKET, Key=item["s3_key"]["S"])["Body"].read().decode("utf-8")
    else:
        body = item["state"]["S"]
    return json.loads(body)["messages"]
