"""The checkpoint store: runs, recorded steps, intents and approvals in one DynamoDB table.

Every write that records a result is conditional (``attribute_not_exists``): a result is written
once, and whoever loses the race reads the winner's record instead of writing its own.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

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
        item[self._schema.ttl_attribute] = {"N": str(int(time.time()) + self.retention_seconds)}
        for name, value in attrs.items():
            if isinstance(value, bool):
                item[name] = {"BOOL": value}
            elif isinstance(value, (int, float)):
                item[name] = {"N": str(value)}
            else:
                item[name] = {"S": value if isinstance(value, str) else json.dumps(value)}
        size = sum(len(k) + len(json.dumps(v)) for k, v in item.items())
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
        out: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :prefix)",
            "ExpressionAttributeNames": {"#pk": self._schema.partition_key, "#sk": self._schema.sort_key},
            "ExpressionAttributeValues": {":pk": {"S": run_id}, ":prefix": {"S": prefix}},
            "ConsistentRead": True,
        }
        while True:
            resp = self.client.query(**kwargs)
            out.extend(_plain(item) for item in resp.get("Items", []))
            if "LastEvaluatedKey" not in resp:
                return out
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    # -- steps -----------------------------------------------------------------------------

    def get_step(self, run_id: str, sk: str) -> StepRecord | None:
        """The recorded step at ``sk``, or None."""
        item = self.get(run_id, sk)
        return _step(item) if item else None

    def record_step(self, run_id: str, sk: str, kind: str, name: str, result: Any) -> None:
        """Record a step's result once.

        Raises:
            AlreadyRecordedError: the step was recorded before.
        """
        self.put_once(run_id, sk, {"kind": kind, "name": name, "result": json.dumps(result), "recorded_at": time.time()})

    def steps(self, run_id: str) -> list[StepRecord]:
        """Every recorded step of a run, in order."""
        return [_step(item) for item in self.query_prefix(run_id, keys.STEP_PREFIX)]


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


def _step(item: dict[str, Any]) -> StepRecord:
    return StepRecord(sk=item["sk"], kind=item["kind"], name=item["name"], result=json.loads(item["result"]))
