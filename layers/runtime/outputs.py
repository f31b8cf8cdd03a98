"""Tool outputs recorded once per run: a result that repeats an earlier one is a reference to it.

A coding agent reads the same file again, greps the same pattern, lists the same folder: the
result is the same bytes as one the run recorded before. Such a result's record holds
``{"same_as": <sort key of the record that holds it>}`` instead of the content (large outputs are
content-addressed in S3 already: ``longstep.artifacts``). A result is known by the sha256 of its
canonical JSON; this process remembers the results it recorded, per run (a bounded cache, as a
warm container keeps them; a run is its id and a random value its record gets at creation, so a
run made again under the same id never sees an earlier one's records), so finding the repeat costs no request. A cold container knows none
and records the content again: correct, only the saving is missed.

A reference must be readable wherever its record is: the holder is in the same run's partition,
at or after the run's *floor* when the reference is written (the first turn a cold load's Query
reads: the window of the latest snapshot, ``floor``), and a snapshot's window starts no later than
the holders its records reference (``longstep.context``). So the one Query of a cold load that
reads a reference reads its holder too. Holders expire with the run's other records and are
renewed with them (``longstep.tasks.common.keep_records``): a record is never removed while a run
that refers to it lives.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
import uuid
from collections import OrderedDict
from typing import Any, Mapping

from longstep import keys
from longstep.contract.run import IDENTITY, RunRecord
from longstep.errors import StepRecordLostError
from longstep.messages import canonical_json

# A recorded tool result that is a reference: its only key, naming the holder's sort key.
SAME_AS = "same_as"
# Results shorter than this (canonical JSON) are recorded as they are: a reference saves nothing.
MIN_SHARED_BYTES = 128
_PER_RUN = 512
_RUNS = 64

_known: "OrderedDict[tuple[str, str, str], OrderedDict[str, str]]" = OrderedDict()
_lock = threading.Lock()


def forget() -> None:
    """Forget every remembered result (tests; a local stack deployed afresh)."""
    with _lock:
        _known.clear()


def floor(run: RunRecord | Mapping[str, Any]) -> int:
    """The first turn a cold load of the run's next turns reads (the run record as loaded): a
    holder before it may be out of that Query's reach."""
    fields = RunRecord.of(run).outputs
    if fields.snapshot_at is None:
        return 0
    return fields.snapshot_windows.get(fields.snapshot_at, fields.snapshot_at)


# The run record's field that tells this run from an earlier one of the same id: a random value
# written once, when Init creates the record. Not the creation instant: a local stack reset with
# its virtual clock makes the same run id again at the same instant (and a process remembered the
# earlier run's holders, so a reference named a record the new run holds other content in).
IDENTITY_FIELD = IDENTITY


def new_identity() -> str:
    """A fresh value for a new run record's ``IDENTITY_FIELD``."""
    return uuid.uuid4().hex


def identity(run: RunRecord | Mapping[str, Any]) -> str | None:
    """What tells this run from an earlier one of the same id (deleted, or a local stack reset):
    its ``IDENTITY_FIELD``. None (a record without it): its results are never shared."""
    return RunRecord.of(run).outputs.identity


def is_reference(result: Any) -> bool:
    """Whether a recorded tool result is a reference to another record."""
    return isinstance(result, dict) and len(result) == 1 and isinstance(result.get(SAME_AS), str)


def _tool_key(sk: str) -> bool:
    try:
        return keys.parse(sk).kind == keys.TOOL
    except keys.SortKeyError:  # a workflow's step, or any other record: never shared
        return False


def _digest(result: Any) -> str | None:
    text = canonical_json(result)
    return hashlib.sha256(text.encode("utf-8")).hexdigest() if len(text) >= MIN_SHARED_BYTES else None


def shared(table: str, run: tuple[str, str], sk: str, result: Any, floor_turn: int | None) -> Any:
    """What to record for tool result ``result`` at ``sk``: a reference to an earlier record of
    the run (its id and ``identity``) holding the same result (at or after ``floor_turn``; None:
    the run's floor is not known, never a reference), else the result itself."""
    if floor_turn is None or not _tool_key(sk):
        return result
    digest = _digest(result)
    with _lock:
        holder = _known.get((table, *run), {}).get(digest) if digest else None
    if holder is not None and holder != sk and (keys.parse(holder).turn or 0) >= floor_turn:
        return {SAME_AS: holder}
    return result


def remember(table: str, run: tuple[str, str], sk: str, result: Any) -> None:
    """``sk`` of the run (its id and ``identity``) was recorded holding ``result`` (its content,
    not a reference): a later repeat may reference it."""
    if not _tool_key(sk) or is_reference(result):
        return
    digest = _digest(result)
    if digest is None:
        return
    with _lock:
        known = _known.setdefault((table, *run), OrderedDict())
        _known.move_to_end((table, *run))
        while len(_known) > _RUNS:
            _known.popitem(last=False)
        known[digest] = sk
        known.move_to_end(digest)
        while len(known) > _PER_RUN:
            known.popitem(last=False)


def holder_turn(result: Any) -> int | None:
    """The turn of the record a reference names (None for a result that is not a reference)."""
    return keys.parse(result[SAME_AS]).turn if is_reference(result) else None


def resolve_within(records: list[Any]) -> list[Any]:
    """Step records (``longstep.store.StepRecord``, key order) with each reference to a record among
    them replaced by that record's result (``holder`` names it); one to a record not among them is left."""
    held = {r.sk: r.result for r in records if not is_reference(r.result)}
    return [resolved(r, held, None) for r in records]


def resolved(record: Any, held: Mapping[str, Any], run_id: str | None) -> Any:
    """``record`` with its reference resolved from ``held`` (results by sort key); when ``run_id``
    is given, a holder not in ``held`` raises StepRecordLostError."""
    if not is_reference(record.result):
        return record
    holder = record.result[SAME_AS]
    if holder not in held or is_reference(held[holder]):  # a holder holds content, never a reference
        if run_id is None:
            return record
        raise StepRecordLostError(f"step {record.sk} of run {run_id} repeats the result of {holder}, which is missing (expired or removed)")
    return dataclasses.replace(record, result=held[holder], holder=holder)
