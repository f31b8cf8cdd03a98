"""The checkpoint store: runs, recorded steps, intents and waits in one DynamoDB table.

``StepStore`` is the seam: the operations the runtime needs on that table. ``CheckpointStore``
implements it on DynamoDB, ``longstep.inmemory.InMemoryStore`` in memory with the same
semantics (unit tests). Both encode records with ``longstep.codec`` and share ``Records``, so
they check the same item size limit and raise the same errors. Every record is written with
its schema version (``longstep.contract.migrations.stamped``: the current one, a step's record its own)
and read through ``longstep.contract.migrations.upgrade``: the runtime sees records in the current format
whichever version wrote them.

Every write that records a result is conditional (``attribute_not_exists``): a result is written
once, and whoever loses the race reads the winner's record instead of writing its own.
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol

from longstep import clock
from longstep import codec, keys
from longstep.contract import migrations
from longstep.claims import StepClaims
from longstep.conditions import Bindings, Condition
from longstep.errors import RecordTooLargeError

# StepRecord, step_record and steps_of are kept importable from here.
from longstep.recorded_steps import RecordedSteps, StepRecord, step_record, steps_of  # noqa: F401

# The run record's attribute holding the expiry floor of every record of the run (``hold``).
FLOOR_ATTRIBUTE = "kept_until"
# Well under DynamoDB's 400 KB item limit; offloading keeps results far below it.
MAX_ITEM_BYTES = 350 * 1024

# Kept importable from here: the JSON payload helpers live in the codec.
encode_json = codec.encode_json
decode_json = codec.decode_json
plain_item = codec.plain
item_size = codec.item_size


class AlreadyRecordedError(Exception):
    """A conditional put found the record already written (by an earlier or concurrent invocation)."""


class StepStore(Protocol):
    """The checkpoint-table operations the runtime uses, on one table of runs' records.

    Records are read as plain values (``longstep.codec.plain``); every read is strongly consistent.
    """

    table_name: str
    retention_seconds: int

    def hold(self, run_id: str, until: float | None) -> None:
        """Records of ``run_id`` this store writes from now on expire no earlier than ``until``."""

    def share_from(self, run_id: str, turn: int, identity: str | None) -> None:
        """A tool result of ``run_id`` (created as ``identity``) this store records from now on may
        reference an earlier record holding the same result at or after ``turn`` (``longstep.outputs``)."""

    def put_once(self, run_id: str, sk: str, attrs: Mapping[str, Any]) -> None:
        """Write a record unless one exists (raises AlreadyRecordedError; RecordTooLargeError)."""

    def put(self, run_id: str, sk: str, attrs: Mapping[str, Any]) -> None:
        """Write a record, replacing any earlier one."""

    def delete(self, run_id: str, sk: str) -> None:
        """Remove a record."""

    def delete_if(self, run_id: str, sk: str, when: Condition) -> bool:
        """Remove a record if ``when`` holds; whether it was removed."""

    def get(self, run_id: str, sk: str) -> dict[str, Any] | None:
        """One record, or None."""

    def get_many(self, run_id: str, sks: list[str]) -> dict[str, dict[str, Any]]:
        """Several records of a run in one request, by sort key (an absent one left out)."""

    def query_between(self, run_id: str, low: str, high: str, *, newest_first: bool = False, limit: int | None = None) -> list[dict[str, Any]]:
        """Records with ``low <= sk <= high``, in key order (reversed when ``newest_first``)."""

    def query_prefix(self, run_id: str, prefix: str) -> list[dict[str, Any]]:
        """Records whose sort key starts with ``prefix``, in key order."""

    def update(
        self, run_id: str, sk: str, values: Mapping[str, Any], *, remove: tuple[str, ...] = (), when: Condition = Condition(), expires: bool = False
    ) -> dict[str, Any] | None:
        """Set ``values`` and remove ``remove`` on a record (created if absent) if ``when`` holds.

        Returns:
            The record as it was before ({} when absent), or None when the condition failed.
        """

    def put_if(self, run_id: str, sk: str, attrs: Mapping[str, Any], when: Condition) -> dict[str, Any] | None:
        """Write a record, replacing any earlier one, if ``when`` holds: None when written, else
        the record found (plain values; {} when absent)."""

    def get_step(self, run_id: str, sk: str) -> StepRecord | None:
        """The recorded step at ``sk``, or None."""

    def resolve(self, run_id: str, records: list[StepRecord]) -> list[StepRecord]:
        """``records`` with each repeated tool result read from the record holding it."""

    def claim_step(self, run_id: str, sk: str, kind: str, name: str, attempt: str, lease_until: float) -> dict[str, Any] | None:
        """Claim a step for ``attempt`` unless it is recorded or held by a live claim (None when
        claimed, else the record found)."""

    def complete_step(self, run_id: str, sk: str, kind: str, name: str, result: Any, attempt: str) -> bool:
        """Write the result into the claim of ``attempt``; False when another attempt holds it now."""

    def release_step(self, run_id: str, sk: str, attempt: str) -> None:
        """End the claim of ``attempt`` at once (its step failed): the next attempt may claim it."""

    def record_step(self, run_id: str, sk: str, kind: str, name: str, result: Any) -> None:
        """Record a step's result once (raises AlreadyRecordedError)."""

    def steps(self, run_id: str) -> list[StepRecord]:
        """Every recorded step of a run, in order."""

    def steps_between(self, run_id: str, first_turn: int, end_turn: int | None = None) -> list[StepRecord]:
        """The recorded steps of turns ``first_turn`` to ``end_turn`` (exclusive; None: to the last)."""


class Records(RecordedSteps, StepClaims):
    """What both stores share: record encoding and its size check, each run's expiry floor, and
    the step operations (claims: ``longstep.claims``; recorded steps, a repeated tool result
    shared: ``longstep.recorded_steps``)."""

    table_name: str
    retention_seconds: int
    _floors: dict[str, float]

    def hold(self, run_id: str, until: float | None) -> None:
        """Records of ``run_id`` written from now on expire no earlier than ``until`` (epoch seconds).

        The run record carries the floor every record of its run must have (``kept_until``, set
        when a turn's longest wait is known: ``longstep.tasks.common.keep_records``); the tasks
        read the run record anyway, and tell the store here. So a record written later in the
        same turn as a long wait (a tool's result next to a 335-day timer) outlives the wait too,
        at no extra request.
        """
        if until is None:
            return
        self._floors[run_id] = max(float(until), self._floors.get(run_id, 0.0))

    def _item(self, run_id: str, sk: str, attrs: Mapping[str, Any]) -> dict[str, Any]:
        """The typed item of a record, with its expiry; checked against the size limit."""
        schema = keys.checkpoint_table()
        item = {schema.partition_key: {"S": run_id}, schema.sort_key: {"S": sk}}
        item[schema.ttl_attribute] = codec.attribute(self._expiry(run_id))
        item.update(codec.attributes(migrations.stamped(dict(attrs), sk)))
        size = codec.item_size(item)
        if size > MAX_ITEM_BYTES:
            raise RecordTooLargeError(f"record {sk} of run {run_id} is {size} bytes, over {MAX_ITEM_BYTES}")
        return item

    @staticmethod
    def _read(item: Mapping[str, Any]) -> dict[str, Any]:
        """A typed item as read: plain values, upgraded to the current schema (RecordSchemaError
        when it is newer than this code)."""
        return migrations.upgrade(codec.plain(item))

    def _expiry(self, run_id: str) -> int:
        """The TTL attribute's value: ``retention_seconds`` after the write, and no earlier than
        the run's floor (``hold``)."""
        floor = self._floors.get(run_id, 0.0)
        return max(int(clock.now()) + self.retention_seconds, int(floor))

    def latest(self, run_id: str, prefix: str, at_most: str) -> dict[str, Any] | None:
        """The record with the greatest ``sk`` that starts with ``prefix`` and is ``<= at_most``."""
        items = self.query_between(run_id, prefix, at_most, newest_first=True, limit=1)
        return items[0] if items else None


class CheckpointStore(Records):
    """Reads and writes runs' records in the checkpoint table (DynamoDB).

    Args:
        table_name: the checkpoint table.
        client: a boto3 DynamoDB client.
        retention_days: records expire (DynamoDB TTL) this many days after they are written.
    """

    def __init__(self, table_name: str, client: Any, retention_days: int = 90) -> None:
        self.table_name = table_name
        self.client = client
        self.retention_seconds = retention_days * 86_400
        self._floors = {}
        self._schema = keys.checkpoint_table()

    def _key(self, run_id: str, sk: str) -> dict[str, Any]:
        return {self._schema.partition_key: {"S": run_id}, self._schema.sort_key: {"S": sk}}

    def put_once(self, run_id: str, sk: str, attrs: Mapping[str, Any]) -> None:
        """Write a record unless one already exists.

        Raises:
            AlreadyRecordedError: the record exists; nothing was written.
            RecordTooLargeError: the record is over MAX_ITEM_BYTES.
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

    def put(self, run_id: str, sk: str, attrs: Mapping[str, Any]) -> None:
        """Write a record, replacing any earlier one (for mutable records such as escalations)."""
        self.client.put_item(TableName=self.table_name, Item=self._item(run_id, sk, attrs))

    def put_if(self, run_id: str, sk: str, attrs: Mapping[str, Any], when: Condition) -> dict[str, Any] | None:
        """Write a record if ``when`` holds: one PutItem.

        Returns:
            None when written; else the record that failed the condition ({} when absent), which
            DynamoDB returns with the error (``ReturnValuesOnConditionCheckFailure``:
            https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_PutItem.html).
        """
        item = self._item(run_id, sk, attrs)
        bind = Bindings()
        pk = bind.name(self._schema.partition_key) if when.exists is not None else ""  # DynamoDB refuses unused names
        parts = when.expression(bind.name, bind.value, pk)
        kwargs: dict[str, Any] = {"TableName": self.table_name, "Item": item, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
        if parts:
            kwargs.update(ConditionExpression=" AND ".join(parts), ExpressionAttributeNames=bind.names)
            if bind.values:
                kwargs["ExpressionAttributeValues"] = bind.values
        try:
            self.client.put_item(**kwargs)
        except self.client.exceptions.ConditionalCheckFailedException as exc:
            found = exc.response.get("Item")
            return self._read(found) if found else {}
        return None

    def delete(self, run_id: str, sk: str) -> None:
        """Remove a record (used only for intent markers a human has cleared)."""
        self.client.delete_item(TableName=self.table_name, Key=self._key(run_id, sk))

    def delete_if(self, run_id: str, sk: str, when: Condition) -> bool:
        """Remove a record if ``when`` holds (one conditional DeleteItem); whether it was removed."""
        bind = Bindings()
        pk = bind.name(self._schema.partition_key)
        parts = [f"attribute_exists({pk})", *when.expression(bind.name, bind.value, pk)]
        kwargs: dict[str, Any] = {"ConditionExpression": " AND ".join(parts), "ExpressionAttributeNames": bind.names}
        if bind.values:
            kwargs["ExpressionAttributeValues"] = bind.values
        try:
            self.client.delete_item(TableName=self.table_name, Key=self._key(run_id, sk), **kwargs)
        except self.client.exceptions.ConditionalCheckFailedException:
            return False
        return True

    def get(self, run_id: str, sk: str) -> dict[str, Any] | None:
        """Read one record as plain Python values, strongly consistent; None when absent."""
        resp = self.client.get_item(TableName=self.table_name, Key=self._key(run_id, sk), ConsistentRead=True)
        item = resp.get("Item")
        return self._read(item) if item else None

    def get_many(self, run_id: str, sks: list[str]) -> dict[str, dict[str, Any]]:
        """Several records of a run (at most 100), strongly consistent, by sort key; an absent one
        is left out. One BatchGetItem (again for any keys DynamoDB leaves unprocessed:
        https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchGetItem.html)."""
        wanted: dict[str, Any] = {self.table_name: {"Keys": [self._key(run_id, sk) for sk in dict.fromkeys(sks)], "ConsistentRead": True}}
        out: dict[str, dict[str, Any]] = {}
        for _ in range(10):
            resp = self.client.batch_get_item(RequestItems=wanted)
            for item in resp.get("Responses", {}).get(self.table_name, []):
                record = self._read(item)
                out[record[self._schema.sort_key]] = record
            wanted = resp.get("UnprocessedKeys") or {}
            if not wanted:
                return out
        raise TimeoutError(f"BatchGetItem on {self.table_name}: keys still unprocessed after 10 requests")

    def query_between(self, run_id: str, low: str, high: str, *, newest_first: bool = False, limit: int | None = None) -> list[dict[str, Any]]:
        """Records with ``low <= sk <= high``, in key order (reversed when ``newest_first``), at
        most ``limit`` of them; every page of the Query, strongly consistent."""
        values = {":pk": {"S": run_id}, ":low": {"S": low}, ":high": {"S": high}}
        return self._query("#pk = :pk AND #sk BETWEEN :low AND :high", values, newest_first, limit)

    def query_prefix(self, run_id: str, prefix: str) -> list[dict[str, Any]]:
        """All records of a run whose sort key starts with ``prefix``, in key order."""
        return self._query("#pk = :pk AND begins_with(#sk, :prefix)", {":pk": {"S": run_id}, ":prefix": {"S": prefix}})

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
            out.extend(self._read(item) for item in resp.get("Items", []))
            if "LastEvaluatedKey" not in resp or (limit and len(out) >= limit):
                return out
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    def update(
        self, run_id: str, sk: str, values: Mapping[str, Any], *, remove: tuple[str, ...] = (), when: Condition = Condition(), expires: bool = False
    ) -> dict[str, Any] | None:
        """Set ``values``, remove ``remove`` and (``expires``) renew the TTL of a record, created
        if absent, if ``when`` holds: one UpdateItem (two when the record is of an older schema).

        A record the update creates gets the schema version a put would write it in
        (``longstep.contract.migrations.written_version``); an existing record keeps its own (its other
        attributes are still in that version's format, upgraded on every read).

        Returns:
            The record as it was before ({} when absent; upgraded to the current schema), or None
            when the condition failed.

        Raises:
            RecordSchemaError: the record is of a newer schema version (nothing was written).
        """
        expected = migrations.written_version(sk)
        for _ in range(3):
            outcome = self._update_at(run_id, sk, values, remove, when, expires, expected)
            if not isinstance(outcome, int):
                return outcome
            expected = outcome
        raise migrations.RecordSchemaError(f"{migrations.SCHEMA_ATTRIBUTE}: record {sk} of run {run_id} kept changing schema version")

    def _update_at(
        self, run_id: str, sk: str, values: Mapping[str, Any], remove: tuple[str, ...], when: Condition, expires: bool, expected: int
    ) -> dict[str, Any] | None | int:
        """The update, on the condition that the record is at schema version ``expected`` (or
        absent when that is the version this code writes it in). Returns the version found instead,
        if it differs."""
        bind = Bindings()
        name, value = bind.name, bind.value
        written = migrations.written_version(sk)
        if expected != written:  # an older record: payloads it can be read with
            values = {a: codec.without_dictionary(v) for a, v in values.items()}
        sets = [f"{name(a)} = {value(v)}" for a, v in values.items()]
        version, pk = name(migrations.SCHEMA_ATTRIBUTE), name(self._schema.partition_key)
        if expected == written == 1:  # written without a version (a step's record): none to set
            parts = [f"(attribute_not_exists({pk}) OR attribute_not_exists({version}) OR {version} = {value(expected)})"]
        elif expected == written:
            sets.append(f"{version} = {value(expected)}")
            parts = [f"(attribute_not_exists({pk}) OR {version} = {value(expected)})"]
        else:  # an older record: leave its version as it is
            parts = [
                f"attribute_exists({pk})",
                f"(attribute_not_exists({version}) OR {version} = {value(expected)})" if expected == 1 else f"{version} = {value(expected)}",
            ]
        if expires:
            sets.append(f"{name(self._schema.ttl_attribute)} = {value(self._expiry(run_id))}")
        expression = "SET " + ", ".join(sets)
        if remove:
            expression += " REMOVE " + ", ".join(name(a) for a in remove)
        parts += when.expression(name, value, pk)
        try:
            resp = self.client.update_item(
                TableName=self.table_name,
                Key=self._key(run_id, sk),
                UpdateExpression=expression,
                ConditionExpression=" AND ".join(parts),
                ExpressionAttributeNames=bind.names,
                ExpressionAttributeValues=bind.values,
                ReturnValues="ALL_OLD",
                # The record that failed the condition comes back with the error: no second read
                # to tell a failed ``when`` from a record of another version.
                # https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateItem.html
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except self.client.exceptions.ConditionalCheckFailedException as exc:
            found = exc.response.get("Item")
            if not found:  # absent: the version condition held only if we expected the written one
                return None if expected == written else written
            actual = migrations.version_of(codec.plain(found))
            if actual > migrations.CURRENT_SCHEMA:
                self._read(found)  # raises RecordSchemaError, naming the record
            return None if actual == expected else actual
        old = resp.get("Attributes")
        return self._read(old) if old else {}
