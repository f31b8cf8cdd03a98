"""moto plumbing for the benchmark: tables and buckets, bytes as stored, reads as requested.

* :func:`item_size` is DynamoDB's item size (what the 400 KB limit and the storage bill count):
  attribute names plus values, by the rules in the DynamoDB developer guide.
* :func:`inventory` adds up what a system left in its tables and buckets: every DynamoDB item
  (idempotency records included) and every S3 object.
* :class:`Meter` counts requests with botocore ``after-call`` event hooks on the clients a system
  uses: read requests, the items they returned and the bytes of those items and objects.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from decimal import Decimal
from typing import Any, Iterable

REGION = "us-east-1"
DYNAMODB_ITEM_LIMIT = 400 * 1024

READ_OPERATIONS = frozenset(
    {"GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems", "GetObject", "HeadObject", "ListObjects", "ListObjectsV2"}
)


def fake_credentials() -> None:
    """Credentials and region moto accepts; nothing leaves the process."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
    }.items():
        os.environ[name] = value
    os.environ.pop("AWS_PROFILE", None)
    # LangChain must not try to trace to a remote service.
    os.environ["LANGSMITH_TRACING"] = "false"
    os.environ["LANGCHAIN_TRACING_V2"] = "false"


def create_table(ddb: Any, name: str, partition_key: str, sort_key: str | None = None) -> None:
    """A pay-per-request table with string keys."""
    schema = [{"AttributeName": partition_key, "KeyType": "HASH"}]
    if sort_key:
        schema.append({"AttributeName": sort_key, "KeyType": "RANGE"})
    ddb.create_table(
        TableName=name,
        KeySchema=schema,
        AttributeDefinitions=[{"AttributeName": k["AttributeName"], "AttributeType": "S"} for k in schema],
        BillingMode="PAY_PER_REQUEST",
    )


# -- sizes --------------------------------------------------------------------------------------


def _number_size(raw: str) -> int:
    digits = raw.lstrip("-").replace(".", "").split("e")[0].split("E")[0].strip("0") or "0"
    return (len(digits) + 1) // 2 + 1


def _value_size(value: dict[str, Any]) -> int:
    ((kind, raw),) = value.items()
    if kind == "S":
        return len(raw.encode("utf-8"))
    if kind == "B":
        return len(raw)
    if kind == "N":
        return _number_size(str(raw) if not isinstance(raw, Decimal) else format(raw, "f"))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode("utf-8")) for s in raw)
    if kind == "BS":
        return sum(len(b) for b in raw)
    if kind == "NS":
        return sum(_number_size(str(n)) for n in raw)
    if kind == "L":
        return 3 + sum(1 + _value_size(v) for v in raw)
    if kind == "M":
        return 3 + sum(1 + len(k.encode("utf-8")) + _value_size(v) for k, v in raw.items())
    raise ValueError(f"unknown DynamoDB type {kind}")


def item_size(item: dict[str, Any]) -> int:
    """DynamoDB's size of an item in the low-level (typed) format."""
    return sum(len(name.encode("utf-8")) + _value_size(value) for name, value in item.items())


def inventory(ddb: Any, s3: Any, tables: Iterable[str], buckets: Iterable[str]) -> dict[str, Any]:
    """Everything stored in ``tables`` and ``buckets``: bytes and items, per table and bucket."""
    out: dict[str, Any] = {"tables": {}, "buckets": {}}
    for table in tables:
        count = size = largest = 0
        kwargs: dict[str, Any] = {"TableName": table}
        while True:
            resp = ddb.scan(**kwargs)
            for item in resp.get("Items", []):
                n = item_size(item)
                count += 1
                size += n
                largest = max(largest, n)
            if "LastEvaluatedKey" not in resp:
                break
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]
        out["tables"][table] = {"items": count, "bytes": size, "largest_item_bytes": largest}
    for bucket in buckets:
        count = size = largest = 0
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for obj in page.get("Contents", []):
                count += 1
                size += obj["Size"]
                largest = max(largest, obj["Size"])
        out["buckets"][bucket] = {"objects": count, "bytes": size, "largest_object_bytes": largest}
    out["dynamodb_items"] = sum(t["items"] for t in out["tables"].values())
    out["dynamodb_bytes"] = sum(t["bytes"] for t in out["tables"].values())
    out["s3_objects"] = sum(b["objects"] for b in out["buckets"].values())
    out["s3_bytes"] = sum(b["bytes"] for b in out["buckets"].values())
    out["items"] = out["dynamodb_items"] + out["s3_objects"]
    out["bytes"] = out["dynamodb_bytes"] + out["s3_bytes"]
    out["largest_dynamodb_item_bytes"] = max((t["largest_item_bytes"] for t in out["tables"].values()), default=0)
    return out


# -- request metering ---------------------------------------------------------------------------


class Meter:
    """Counts DynamoDB and S3 requests made through the clients it is attached to.

    ``requests``, ``items_read`` and ``bytes_read`` cover read operations only; items are DynamoDB
    items returned plus S3 objects read, bytes are those items' DynamoDB sizes plus the objects'
    lengths. Writes are counted apart, so a read-only phase can be checked to write nothing.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.requests = 0
            self.items_read = 0
            self.bytes_read = 0
            self.write_requests = 0
            self.by_operation: Counter[str] = Counter()

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "requests": self.requests,
                "items_read": self.items_read,
                "bytes_read": self.bytes_read,
                "write_requests": self.write_requests,
                "by_operation": dict(sorted(self.by_operation.items())),
            }

    def attach(self, client: Any) -> Any:
        """Count the requests of ``client`` (returned for chaining)."""
        service = client.meta.service_model.service_id.hyphenize()
        client.meta.events.register(f"after-call.{service}", self._after_call, unique_id=f"bench-meter-{id(self)}")
        return client

    def attach_session(self, session: Any) -> Any:
        """Count the requests of every client ``session`` (boto3) creates from now on."""
        for service in ("dynamodb", "s3"):
            session.events.register(f"after-call.{service}", self._after_call, unique_id=f"bench-meter-{id(self)}-{service}")
        return session

    def _after_call(self, model: Any = None, parsed: Any = None, **_: Any) -> None:
        op = model.name if model is not None else "?"
        items = 0
        size = 0
        if op in READ_OPERATIONS and isinstance(parsed, dict):
            if "Item" in parsed:
                items, size = 1, item_size(parsed["Item"])
            elif "Items" in parsed:
                items = len(parsed["Items"])
                size = sum(item_size(i) for i in parsed["Items"])
            elif "Responses" in parsed:
                for rows in parsed["Responses"].values():
                    if isinstance(rows, list):
                        items += len(rows)
                        size += sum(item_size(i) for i in rows)
            elif op == "GetObject":
                items, size = 1, int(parsed.get("ContentLength", 0))
        with self._lock:
            self.by_operation[op] += 1
            if op in READ_OPERATIONS:
                self.requests += 1
                self.items_read += items
                self.bytes_read += size
            else:
                self.write_requests += 1
