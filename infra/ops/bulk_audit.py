"""The audit trail of bulk operations, in the checkpoint table: who ran what, on which runs, and
what became of each.

An operation is the item ``pk = bulk#<id>``, ``sk = op`` (verb, query, who, when, its options and
its status: ``selecting``, ``running``, ``done``), filed in the ``audit`` partition of the runs
index so ``longstep audit`` lists operations newest first with one Query. Each selected run is an
item ``sk = run#<run_id>`` of the same operation: ``pending``, then ``acting`` (with what the
action will do, written before it acts), then ``done`` with its outcome. The items are the
operation's cursor too: an interrupted operation goes on from its pending and acting runs.
Operation ids hold a '#', which no run id does, so they never meet a run's records.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from longstep import clock, codec, keys
from longstep.errors import LongstepError
from longstep.store import AlreadyRecordedError, CheckpointStore, Condition

OP_PREFIX = "bulk#"
OP_RECORD = "op"
RUN_PREFIX = "run#"
AUDIT_FACET = "audit"
SELECTING, RUNNING, DONE = "selecting", "running", "done"
PENDING, ACTING = "pending", "acting"


class OperationNotFoundError(LongstepError):
    """No bulk operation has this id."""


@dataclass
class AuditTrail:
    """The bulk operations of one deployment.

    Args:
        store: the checkpoint store.
    """

    store: CheckpointStore

    def create(self, verb: str, where: str, who: str, options: dict[str, Any]) -> str:
        """A new operation (``selecting``); returns its id."""
        op_id = f"{OP_PREFIX}{clock.now():.0f}-{uuid.uuid4().hex[:8]}"
        now = clock.now()
        record = {"verb": verb, "where": where, "who": who, "created_at": now, "options": options, "status": SELECTING, "selected": 0}
        record[keys.RUNS_FACET_ATTRIBUTE] = AUDIT_FACET
        record[keys.RUNS_ORDER_ATTRIBUTE] = keys.run_order(now, op_id)
        self.store.put_once(op_id, OP_RECORD, record)
        return op_id

    def operation(self, op_id: str) -> dict[str, Any]:
        """The operation record (``options`` decoded).

        Raises:
            OperationNotFoundError: no such operation.
        """
        if not op_id.startswith(OP_PREFIX):
            op_id = OP_PREFIX + op_id
        record = self.store.get(op_id, OP_RECORD)
        if record is None:
            raise OperationNotFoundError(f"operation: no bulk operation {op_id!r} (list them with `longstep audit`)")
        for name in ("options", "counts"):
            record[name] = json.loads(record[name]) if isinstance(record.get(name), str) else record.get(name) or {}
        record["op_id"] = op_id
        return record

    def add_runs(self, op_id: str, run_ids: list[str]) -> int:
        """File the selection (each run ``pending``; one already filed stays as it is); then
        the operation is ``running``. Returns how many runs it has."""
        for run_id in run_ids:
            try:
                self.store.put_once(op_id, RUN_PREFIX + run_id, {"run_id": run_id, "state": PENDING})
            except AlreadyRecordedError:
                pass
        self.store.update(op_id, OP_RECORD, {"status": RUNNING, "selected": len(run_ids)}, when=Condition(exists=True))
        return len(run_ids)

    def runs(self, op_id: str) -> list[dict[str, Any]]:
        """The operation's runs, in run id order."""
        return self.store.query_prefix(op_id, RUN_PREFIX)

    def acting(self, op_id: str, run_id: str, plan: dict[str, Any]) -> None:
        """Say what the action on ``run_id`` will do, before it is done (``plan``: e.g. the
        execution name a resume starts), so an interrupted operation never does it twice."""
        self.store.update(op_id, RUN_PREFIX + run_id, {"state": ACTING, "plan": plan, "acting_at": clock.now()}, when=Condition(exists=True))

    def outcome(self, op_id: str, run_id: str, outcome: str, detail: str = "") -> None:
        """The run's outcome (``stopped``, ``resumed``, ``diverged``...), and it is done."""
        self.store.update(
            op_id, RUN_PREFIX + run_id, {"state": DONE, "outcome": outcome, "detail": detail, "done_at": clock.now()}, when=Condition(exists=True)
        )

    def finish(self, op_id: str, counts: dict[str, int]) -> None:
        """The operation is done; ``counts`` of each outcome."""
        self.store.update(op_id, OP_RECORD, {"status": DONE, "counts": counts, "finished_at": clock.now()}, when=Condition(exists=True))

    def recent(self, dynamodb: Any, limit: int = 20) -> list[dict[str, Any]]:
        """The latest operations, newest first (one Query of the index's ``audit`` partition)."""
        resp = dynamodb.query(
            TableName=self.store.table_name,
            IndexName=keys.RUNS_INDEX,
            KeyConditionExpression="#f = :f",
            ExpressionAttributeNames={"#f": keys.RUNS_FACET_ATTRIBUTE},
            ExpressionAttributeValues={":f": {"S": AUDIT_FACET}},
            ScanIndexForward=False,
            Limit=limit,
        )
        out = []
        for raw in resp.get("Items", []):
            item = codec.plain(raw)
            item["op_id"] = item["pk"]
            out.append(item)
        return out
