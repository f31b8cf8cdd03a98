"""Recorded steps: their records, written with a repeated tool result shared, read with it resolved.

A step's record holds its result (``longstep.codec.encode_json``), or, for a tool result the run
recorded before, a reference to the record holding it (``longstep.outputs``). ``RecordedSteps``
(mixed into ``longstep.store.Records``, so both stores share it) writes the one and resolves the
other on every read: the runtime only ever sees results.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from longstep import clock, codec, keys, outputs
from longstep.claims import RECORDED_ATTRIBUTE, is_claim


@dataclass(frozen=True)
class StepRecord:
    """A recorded step.

    Attributes:
        sk: sort key within the run.
        kind: ``model`` or ``tool``.
        name: the model operation or tool name the step ran.
        result: the recorded result (JSON value); a reference (``longstep.outputs``) until resolved.
        holder: the record whose content ``result`` is, when the record references it.
    """

    sk: str
    kind: str
    name: str
    result: Any
    holder: str | None = None


def step_record(item: Mapping[str, Any]) -> StepRecord:
    """A checkpoint-table item (plain values) of a recorded step as a StepRecord."""
    return StepRecord(sk=item["sk"], kind=item["kind"], name=item["name"], result=codec.decode_json("result", item))


def steps_of(items: list[dict[str, Any]]) -> list[StepRecord]:
    """The recorded steps among records (plain values) read from the step range, in their order
    (steps under way left out); a reference to a record among them is resolved (``resolve_within``)."""
    return outputs.resolve_within([step_record(i) for i in items if keys.parse(i["sk"]).is_step and not is_claim(i)])


class RecordedSteps:
    """The step operations of a store (mixed into ``longstep.store.Records``), built on its
    ``get``, ``get_many``, ``put_once``, ``query_between`` and ``query_prefix``."""

    table_name: str

    def get(self, run_id: str, sk: str) -> dict[str, Any] | None:  # pragma: no cover - the store's
        raise NotImplementedError

    def get_many(self, run_id: str, sks: list[str]) -> dict[str, dict[str, Any]]:  # pragma: no cover
        raise NotImplementedError

    def put_once(self, run_id: str, sk: str, attrs: Mapping[str, Any]) -> None:  # pragma: no cover
        raise NotImplementedError

    def query_between(
        self, run_id: str, low: str, high: str, *, newest_first: bool = False, limit: int | None = None
    ) -> list[dict[str, Any]]:  # pragma: no cover
        raise NotImplementedError

    def query_prefix(self, run_id: str, prefix: str) -> list[dict[str, Any]]:  # pragma: no cover
        raise NotImplementedError

    def share_from(self, run_id: str, turn: int, identity: str | None) -> None:
        """A tool result of ``run_id`` (the run created as ``identity``: ``longstep.outputs.identity``)
        recorded from now on may reference an earlier record holding the same result at or after
        ``turn`` (the run's floor: ``longstep.outputs.floor``); the tasks read the run record anyway,
        and tell the store here, as for ``hold``. None: never."""
        floors = self.__dict__.setdefault("_share_floors", {})
        floors[run_id] = None if identity is None else (int(turn), identity)

    def _stored_result(self, run_id: str, sk: str, result: Any) -> Any:
        """What a step's record holds for ``result``: a reference to a record holding the same
        tool result, or the result."""
        known = self.__dict__.get("_share_floors", {}).get(run_id)
        return result if known is None else outputs.shared(self.table_name, (run_id, known[1]), sk, result, known[0])

    def _recorded(self, run_id: str, sk: str, result: Any, stored: Any) -> None:
        """``sk`` now holds ``stored`` for ``result``: remember it as that content's holder."""
        known = self.__dict__.get("_share_floors", {}).get(run_id)
        if stored is result and known is not None:
            outputs.remember(self.table_name, (run_id, known[1]), sk, result)

    def resolve(self, run_id: str, records: list[StepRecord]) -> list[StepRecord]:
        """``records`` (key order) with every reference replaced by its holder's result: from among
        them, else read (one request per 100 that are not).

        Raises:
            StepRecordLostError: a holder is not there (expired or removed).
        """
        records = outputs.resolve_within(records)
        missing = sorted({r.result[outputs.SAME_AS] for r in records if outputs.is_reference(r.result)})
        if not missing:
            return records
        found: dict[str, Any] = {}
        for at in range(0, len(missing), 100):  # BatchGetItem takes at most 100 keys
            found.update({sk: step_record(item).result for sk, item in self.get_many(run_id, missing[at : at + 100]).items() if not is_claim(item)})
        return [outputs.resolved(r, found, run_id) for r in records]

    def get_step(self, run_id: str, sk: str) -> StepRecord | None:
        """The recorded step at ``sk``, or None (a step under way has no record yet)."""
        item = self.get(run_id, sk)
        return self.resolve(run_id, [step_record(item)])[0] if item and not is_claim(item) else None

    def record_step(self, run_id: str, sk: str, kind: str, name: str, result: Any) -> None:
        """Record a step's result once (compressed when that makes it smaller; a repeated tool
        result as a reference: ``longstep.outputs``).

        Raises:
            AlreadyRecordedError: the step was recorded before.
        """
        stored = self._stored_result(run_id, sk, result)
        self.put_once(run_id, sk, {"kind": kind, "name": name, **codec.encode_json("result", stored), RECORDED_ATTRIBUTE: clock.now()})
        self._recorded(run_id, sk, result, stored)

    def steps(self, run_id: str) -> list[StepRecord]:
        """Every recorded step of a run, in order (snapshots and summaries left out)."""
        return self.resolve(run_id, steps_of(self.query_prefix(run_id, keys.STEP_PREFIX)))

    def steps_between(self, run_id: str, first_turn: int, end_turn: int | None = None) -> list[StepRecord]:
        """The recorded steps of turns ``first_turn`` to ``end_turn`` (exclusive; None: to the last)."""
        high = keys.turn_key(end_turn) if end_turn is not None else keys.STEP_PREFIX + "~"
        return self.resolve(run_id, steps_of(self.query_between(run_id, keys.turn_key(first_turn), high)))
