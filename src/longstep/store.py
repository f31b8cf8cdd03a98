"""The checkpoint store: runs, recorded steps, intents and approvals in one DynamoDB table.

Every write that records a result is conditional (``attribute_not_exists``): a result is written
once, and whoever loses the race reads the winner's record instead of writing its own.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from typing import Any

from longstep import clock
from longstep import keys
from longstep.errors import PermanentError

# Well under DynamoDB's 400 KB item limit; offloading keeps results far below it.
MAX_ITEM_BYTES = 350 * 1024


class RecordTooLargeError(PermanentError):
    """A record would not fit in a DynamoDB item; it must be offloaded first."""


class AlreadyRecordedError(Exception):
    """A conditional put found the record already written (by an earlier or concurrent invocation)."""


@dataclass(frozen=True)
class StepRecord:
    """A recorded step.

    Attributes:
        sk: sort key within the run.
        kind: ``model`` or ``tool``.
        name: the model operation or tool name the step ran.
        result: the recorded result (JSON value).
    """

    sk: str
    kind: str
    name: str
    result: Any


class CheckpointStore:
    """Reads and writes one run's records.

    Args:
        table_name: the checkpoint table.
        client: a boto3 DynamoDB client.
        retention_days: records expire (DynamoDB TTL) this many days after they are written.
    """

    def __init__(self, table_name: str, client: Any, retention_days: int = 90) -> None:
        self.table_name = table_name
        self.client = client
        self.retention_seconds = retention_days * 86_400
        self._schema = keys.checkpoint_table()

    # -- low level -------------------------------------------------------------------------

    def _key(self, run_id: str, sk: str) -> dict[str, Any]:
        return {self._schema.partition_key: {"S": run_id}, self._schema.sort_key: {"S": sk}}

    def _item(self, run_id: str, sk: str, attrs: dict[str, Any]) -> dict[str, Any]:
        item = self._key(run_id, sk)
        item[self._schema.ttl_attribute] = {"N": str(int(clock.now()) + self.retention_seconds)}
        for name, value in attrs.items():
            if isinstance(value, bool):
                item[name] = {"BOOL": value}
            elif isinstance(value, bytes):
                item[name] = {"B": value}
            elif isinstance(value, (int, float)):
                item[name] = {"N": str(value)}
            else:
                item[name] = {"S": value if isinstance(value, str) else json.dumps(value)}
        size = sum(len(k) + _value_size(v) for k, v in item.items())
        if size > MAX_ITEM_BYTES:
            raise RecordTooLargeError(f"record {sk} of run {run_id} is {size} bytes, over {MAX_ITEM_BYTES}")
        return item

    def put_once(self, run_id: str, sk: str, attrs: dict[str, Any]) -> None:
        """Write a record unless one already exists.

        Raises:
            AlreadyRecordedError: the record exists; nothing was written.
        """
        item = self._item(run_id, sk, attrs)
        try:
            self.client.put_item(
                TableName=self.table_name,
                Item=item,
                ConditionExpression="attribute_not_exists(#pk)",
                ExpressionAttributeNames={"#pk": self._schema.partition_key},
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            raise AlreadyRecordedError(sk) from None

    def put(self, run_id: str, sk: str, attrs: dict[str, Any]) -> None:
        """Write a record, replacing any earlier one (for mutable records such as approvals)."""
        self.client.put_item(TableName=self.table_name, Item=self._item(run_id, sk, attrs))

    def delete(self, run_id: str, sk: str) -> None:
        """Remove a record (used only for intent markers a human has cleared)."""
        self.client.delete_item(TableName=self.table_name, Key=self._key(run_id, sk))

    def get(self, run_id: str, sk: str) -> dict[str, Any] | None:
        """Read one record as plain Python values, strongly consistent; None when absent."""
        resp = self.client.get_item(TableName=self.table_name, Key=self._key(run_id, sk), ConsistentRead=True)
        item = resp.get("Item")
        return _plain(item) if item else None

    def query_prefix(self, run_id: str, prefix: str) -> list[dict[str, Any]]:
        """All records of a run whose sort key starts with ``prefix``, in key order."""
        return self._query("#pk = :pk AND begins_with(#sk, :prefix)", {":pk": {"S": run_id}, ":prefix": {"S": prefix}})

    # -- steps -----------------------------------------------------------------------------

    def get_step(self, run_id: str, sk: str) -> StepRecord | None:
        """The recorded step at ``sk``, or None."""
        item = self.get(run_id, sk)
        return _step(item) if item else None

    def record_step(self, run_id: str, sk: str, kind: str, name: str, result: Any) -> None:
        """Record a step's result once (compressed when that makes it smaller).

        Raises:
            AlreadyRecordedError: the step was recorded before.
        """
        self.put_once(run_id, sk, {"kind": kind, "name": name, **encode_json("result", result), "recorded_at": clock.now()})

    def steps(self, run_id: str) -> list[StepRecord]:
        """Every recorded step of a run, in order."""
        return [_step(item) for item in self.query_prefix(run_id, keys.STEP_PREFIX)]

    def steps_between(self, run_id: str, first_turn: int, end_turn: int | None = None) -> list[StepRecord]:
        """The recorded steps of turns ``first_turn`` to ``end_turn`` (exclusive; None: to the last)."""
        low = f"{keys.STEP_PREFIX}{first_turn:06d}"
        high = f"{keys.STEP_PREFIX}{end_turn:06d}" if end_turn is not None else keys.STEP_PREFIX + "~"
        return [_step(item) for item in self.query_between(run_id, low, high) if not item["sk"].startswith(high)]

    def query_between(self, run_id: str, low: str, high: str) -> list[dict[str, Any]]:
        """Records with ``low <= sk <= high``, in key order."""
        return self._query(
            "#pk = :pk AND #sk BETWEEN :low AND :high",
            {":pk": {"S": run_id}, ":low": {"S": low}, ":high": {"S": high}},
        )

    def latest(self, run_id: str, prefix: str, at_most: str) -> dict[str, Any] | None:
        """The record with the greatest ``sk`` that starts with ``prefix`` and is ``<= at_most``."""
        items = self._query(
            "#pk = :pk AND #sk BETWEEN :low AND :high",
            {":pk": {"S": run_id}, ":low": {"S": prefix}, ":high": {"S": at_most}},
            newest_first=True,
            limit=1,
        )
        return items[0] if items else None

    def _query(self, condition: str, values: dict[str, Any], newest_first: bool = False, limit: int | None = None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": condition,
            "ExpressionAttributeNames": {"#pk": self._schema.partition_key, "#sk": self._schema.sort_key},
            "ExpressionAttributeValues": values,
            "ConsistentRead": True,
            "ScanIndexForward": not newest_first,
        }
        if limit:
            kwargs["Limit"] = limit
        while True:
            resp = self.client.query(**kwargs)
            out.extend(_plain(item) for item in resp.get("Items", []))
            if "LastEvaluatedKey" not in resp or (limit and len(out) >= limit):
                return out
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]


def plain_item(item: dict[str, Any]) -> dict[str, Any]:
    """A DynamoDB item (typed attribute values) as plain Python values."""
    return _plain(item)


def _plain(item: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in item.items():
        ((kind, raw),) = value.items()
        if kind == "N":
            out[name] = float(raw) if "." in raw else int(raw)
        elif kind == "BOOL":
            out[name] = raw
        else:
            out[name] = raw
    return out


def step_record(item: dict[str, Any]) -> StepRecord:
    """A checkpoint-table item (plain values) as a StepRecord."""
    return _step(item)


def _step(item: dict[str, Any]) -> StepRecord:
    return StepRecord(sk=item["sk"], kind=item["kind"], name=item["name"], result=decode_json("result", item))


# Payloads under this many bytes are stored as plain JSON: compressing them saves nothing.
COMPRESS_FROM_BYTES = 512


def encode_json(name: str, value: Any) -> dict[str, Any]:
    """``{name: json}``, or ``{name + "_z": zlib(json)}`` when compression makes it smaller."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    raw = text.encode("utf-8")
    if len(raw) >= COMPRESS_FROM_BYTES:
        packed = zlib.compress(raw, 6)
        if len(packed) < len(raw):
            return {f"{name}_z": packed}
    return {name: text}


def decode_json(name: str, item: dict[str, Any]) -> Any:
    """The value ``encode_json`` stored under ``name`` in ``item``."""
    if f"{name}_z" in item:
        return json.loads(zlib.decompress(item[f"{name}_z"]).decode("utf-8"))
    return json.loads(item[name])


def _value_size(value: dict[str, Any]) -> int:
    ((kind, raw),) = value.items()
    return len(raw) if kind == "B" else len(json.dumps(raw))


def item_size(item: dict[str, Any]) -> int:
    """A DynamoDB item's size as DynamoDB counts it: attribute names plus value sizes."""
    return sum(len(name.encode("utf-8")) + attribute_size(value) for name, value in item.items())


def attribute_size(value: dict[str, Any]) -> int:
    """The size of one typed attribute value (strings in UTF-8, numbers ~ their digits)."""
    ((kind, raw),) = value.items()
    if kind == "S":
        return len(raw.encode("utf-8"))
    if kind == "B":
        return len(raw)
    if kind == "N":
        return len(raw.lstrip("-").replace(".", "")) // 2 + 1
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(attribute_size(v) + 1 for v in raw)
    if kind == "M":
        return 3 + sum(len(k.encode("utf-8")) + attribute_size(v) + 1 for k, v in raw.items())
    return sum(len(str(v).encode("utf-8")) for v in raw)  # string/number/binary sets
