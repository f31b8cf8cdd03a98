"""An in-memory checkpoint store with the semantics of ``CheckpointStore`` on DynamoDB.

Records are kept as typed items built by the same code as DynamoDB's (``Records._item``: the
codec and the size limit) and read back through ``longstep.codec.plain``; a put-once of an
existing record raises ``AlreadyRecordedError``, a failed update condition returns None, and
every read sees every write before it (DynamoDB's strongly consistent reads). One lock makes each
operation atomic, as one DynamoDB request is. For unit tests and anything else that must not
reach AWS.
"""

from __future__ import annotations

import copy
import threading
from typing import Any, Mapping

from longstep import codec, keys
from longstep.contract import migrations
from longstep.store import AlreadyRecordedError, Condition, Records


class InMemoryStore(Records):
    """A checkpoint table in a dict.

    Args:
        table_name: a name for the table (the context cache keys runs by table and run).
        retention_days: records carry an expiry this many days after they are written (not enforced).

    Attributes:
        requests: how many read requests each operation would have made on DynamoDB, by operation
            (``GetItem``, ``BatchGetItem``, ``Query``): what a test counts to check a read path's cost.
    """

    def __init__(self, table_name: str = "checkpoints", retention_days: int = 90) -> None:
        self.table_name = table_name
        self.retention_seconds = retention_days * 86_400
        self._floors: dict[str, float] = {}
        self.requests: dict[str, int] = {"GetItem": 0, "BatchGetItem": 0, "Query": 0}
        self._items: dict[str, dict[str, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def reads(self) -> int:
        """Read requests made so far (every Query counts once: no item set here passes 1 MB)."""
        return sum(self.requests.values())

    def put_once(self, run_id: str, sk: str, attrs: Mapping[str, Any]) -> None:
        """Write a record unless one already exists.

        Raises:
            AlreadyRecordedError: the record exists; nothing was written.
            RecordTooLargeError: the record is over MAX_ITEM_BYTES.
        """
        item = self._item(run_id, sk, attrs)
        with self._lock:
            run = self._items.setdefault(run_id, {})
            if sk in run:
                raise AlreadyRecordedError(sk)
            run[sk] = item

    def put(self, run_id: str, sk: str, attrs: Mapping[str, Any]) -> None:
        """Write a record, replacing any earlier one."""
        item = self._item(run_id, sk, attrs)
        with self._lock:
            self._items.setdefault(run_id, {})[sk] = item

    def put_if(self, run_id: str, sk: str, attrs: Mapping[str, Any], when: Condition) -> dict[str, Any] | None:
        """Write a record if ``when`` holds: None when written, else the record found ({} when absent)."""
        item = self._item(run_id, sk, attrs)
        with self._lock:
            run = self._items.setdefault(run_id, {})
            old = run.get(sk)
            before = self._read(copy.deepcopy(old)) if old is not None else None
            if not when.holds(before):
                return before or {}
            run[sk] = item
            return None

    def delete(self, run_id: str, sk: str) -> None:
        """Remove a record (nothing happens when it is absent, as on DynamoDB)."""
        with self._lock:
            self._items.get(run_id, {}).pop(sk, None)

    def delete_if(self, run_id: str, sk: str, when: Condition) -> bool:
        """Remove a record if it exists and ``when`` holds; whether it was removed."""
        with self._lock:
            run = self._items.get(run_id, {})
            if sk not in run or not when.holds(codec.plain(run[sk])):
                return False
            del run[sk]
            return True

    def get(self, run_id: str, sk: str) -> dict[str, Any] | None:
        """One record as plain values, or None."""
        with self._lock:
            self.requests["GetItem"] += 1
            item = self._items.get(run_id, {}).get(sk)
            return self._read(copy.deepcopy(item)) if item is not None else None

    def get_many(self, run_id: str, sks: list[str]) -> dict[str, dict[str, Any]]:
        """Several records of a run in one request, by sort key (an absent one left out)."""
        with self._lock:
            self.requests["BatchGetItem"] += 1
            run = self._items.get(run_id, {})
            return {sk: self._read(copy.deepcopy(run[sk])) for sk in dict.fromkeys(sks) if sk in run}

    def query_between(self, run_id: str, low: str, high: str, *, newest_first: bool = False, limit: int | None = None) -> list[dict[str, Any]]:
        """Records with ``low <= sk <= high``, in key order (reversed when ``newest_first``)."""
        if low > high:  # DynamoDB refuses such a BETWEEN with a ValidationException
            raise ValueError(f"low {low!r} sorts after high {high!r}")
        return self._select(run_id, lambda sk: low <= sk <= high, newest_first, limit)

    def query_prefix(self, run_id: str, prefix: str) -> list[dict[str, Any]]:
        """Records whose sort key starts with ``prefix``, in key order."""
        return self._select(run_id, lambda sk: sk.startswith(prefix), False, None)

    def _select(self, run_id: str, keep: Any, newest_first: bool, limit: int | None) -> list[dict[str, Any]]:
        with self._lock:
            self.requests["Query"] += 1
            # Sort keys are strings: DynamoDB orders them by their UTF-8 bytes, which is the order
            # of their code points, Python's string order.
            run = self._items.get(run_id, {})
            chosen = sorted((sk for sk in run if keep(sk)), reverse=newest_first)[: limit or None]
            return [self._read(copy.deepcopy(run[sk])) for sk in chosen]

    def update(
        self, run_id: str, sk: str, values: Mapping[str, Any], *, remove: tuple[str, ...] = (), when: Condition = Condition(), expires: bool = False
    ) -> dict[str, Any] | None:
        """Set ``values`` and remove ``remove`` on a record (created if absent) if ``when`` holds.

        Returns:
            The record as it was before ({} when absent), or None when the condition failed.
        """
        with self._lock:
            run = self._items.setdefault(run_id, {})
            old = run.get(sk)
            before = codec.plain(old) if old is not None else None
            if before is not None and migrations.version_of(before) > migrations.CURRENT_SCHEMA:
                migrations.upgrade(before)  # raises RecordSchemaError: nothing is written, as on DynamoDB
            if not when.holds(before):
                return None
            schema = keys.checkpoint_table()
            item = copy.deepcopy(old) if old is not None else {schema.partition_key: {"S": run_id}, schema.sort_key: {"S": sk}}
            if old is None:  # a created record gets the version a put writes; an old one keeps its own
                item.update(codec.attributes(migrations.stamped({}, sk)))
            elif migrations.version_of(before) != migrations.written_version(sk):  # payloads it can be read with
                values = {a: codec.without_dictionary(v) for a, v in values.items()}
            item.update(codec.attributes(values))
            if expires:
                item[schema.ttl_attribute] = codec.attribute(self._expiry(run_id))
            for name in remove:
                item.pop(name, None)
            run[sk] = item
            return migrations.upgrade(copy.deepcopy(before)) if before is not None else {}

    def items(self, run_id: str) -> dict[str, dict[str, Any]]:
        """Every record of a run as typed items, by sort key (what a test inspects)."""
        with self._lock:
            return copy.deepcopy(self._items.get(run_id, {}))
