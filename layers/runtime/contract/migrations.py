"""Schema versions of checkpoint records, and the migrators that upgrade old records on read.

A run can wait for days while a new runtime is deployed: the new code then reads records the old
code wrote. Every record the stores write carries ``schema_version`` (``SCHEMA_ATTRIBUTE``; a
step's record the version its own format last changed in, ``STEP_SCHEMA``, and none were that
version 1); a record without it is version 1. On every read the stores pass the record through
``upgrade``, which applies the registered migrators in turn (version n to n + 1) until the
record is at ``CURRENT_SCHEMA``, so the rest of the runtime only ever sees the current format.
A record of a version newer than this code knows (written by a newer deployment, then read by a
rolled-back one) raises ``RecordSchemaError`` instead of being misread.

Migrators upgrade what is read, never the stored item: a record is rewritten in the current
format only when the runtime writes it again. Conditional updates evaluate the stored item, so a
migrator may add attributes or derive new ones but must not rename or change the meaning of an
attribute a condition tests (``status``, ``snapshot_at``).

To change the format: bump ``CURRENT_SCHEMA`` and register ``@migrator(previous)``; keep a fixture
of records in the previous format (``tests/fixtures/records_v1.json`` is the first) and a test
that reads them. A change to a step's record also sets ``STEP_SCHEMA`` to the new version, so
step records are stamped again and a runtime too old for them refuses them.
"""

from __future__ import annotations

from typing import Any, Callable

from longstep import keys
from longstep.errors import RecordSchemaError

# The attribute holding a record's schema version (absent: version 1).
SCHEMA_ATTRIBUTE = "schema_version"
# The format this code writes.
CURRENT_SCHEMA = 5
# The version whose format a step's record (a model reply or a tool result, or the claim of one
# under way: ``longstep.recorded_steps``, ``longstep.claims``) is written in. It was version 1's
# until version 5 packed payloads against a preset dictionary (``longstep.codec.DICTIONARIES``).
# Were it 1, a step's record would carry no ``schema_version`` (every reader takes a record
# without one for version 1): the stamp says something only when a step's format has changed.
# Set it to ``CURRENT_SCHEMA`` whenever that format changes, so a runtime too old refuses them.
STEP_SCHEMA = 5
# The code version of a run created before run records held one (``longstep.code_version``).
UNRECORDED_CODE_VERSION = "unrecorded"

Migrator = Callable[[dict[str, Any]], dict[str, Any]]
_migrators: dict[int, Migrator] = {}

__all__ = [
    "CURRENT_SCHEMA",
    "SCHEMA_ATTRIBUTE",
    "STEP_SCHEMA",
    "RecordSchemaError",
    "migrator",
    "stamped",
    "upgrade",
    "version_of",
    "written_version",
]


def migrator(from_version: int) -> Callable[[Migrator], Migrator]:
    """Register ``fn(record) -> record`` as the upgrade of plain records from ``from_version`` to
    ``from_version + 1`` (one migrator per version; the record passed in may be modified)."""

    def register(fn: Migrator) -> Migrator:
        if from_version in _migrators:
            raise ValueError(f"a migrator from schema version {from_version} is registered twice")
        _migrators[from_version] = fn
        return fn

    return register


def version_of(record: dict[str, Any]) -> int:
    """The schema version of a plain record (1 when it carries none).

    Raises:
        RecordSchemaError: the attribute is not a positive integer.
    """
    raw = record.get(SCHEMA_ATTRIBUTE, 1)
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
        raise RecordSchemaError(f"{SCHEMA_ATTRIBUTE}: record {record.get('sk')!r} of run {record.get('pk')!r} has schema version {raw!r}")
    return raw


def upgrade(record: dict[str, Any]) -> dict[str, Any]:
    """A plain record (as a store read it) in the current format.

    Raises:
        RecordSchemaError: the record is of a newer schema version than this code knows, or a
            migrator for one of its versions is missing.
    """
    version = version_of(record)
    if version > CURRENT_SCHEMA:
        raise RecordSchemaError(
            f"{SCHEMA_ATTRIBUTE}: record {record.get('sk')!r} of run {record.get('pk')!r} is schema version {version}, "
            f"newer than this code's {CURRENT_SCHEMA}: deploy the newer runtime that wrote it"
        )
    while version < CURRENT_SCHEMA:
        step = _migrators.get(version)
        if step is None:
            raise RecordSchemaError(f"{SCHEMA_ATTRIBUTE}: no migrator from schema version {version} to {version + 1}")
        record = step(record)
        version += 1
    record[SCHEMA_ATTRIBUTE] = CURRENT_SCHEMA
    return record


def written_version(sk: str) -> int:
    """The schema version this code writes the record at sort key ``sk`` in: ``STEP_SCHEMA`` for
    a step's record (a model reply or a tool result), else ``CURRENT_SCHEMA``."""
    try:
        return STEP_SCHEMA if keys.parse(sk).is_step else CURRENT_SCHEMA
    except keys.SortKeyError:  # a workflow's records, any other key: the current version
        return CURRENT_SCHEMA


def stamped(attrs: dict[str, Any], sk: str) -> dict[str, Any]:
    """``attrs`` as a record about to be written at ``sk``: with its schema version
    (``written_version``), left out when that is 1 (what a record without one is)."""
    version = written_version(sk)
    return dict(attrs) if version == 1 else {**attrs, SCHEMA_ATTRIBUTE: version}


# --- the migrators ---------------------------------------------------------------------------


@migrator(1)
def _versions_recorded(record: dict[str, Any]) -> dict[str, Any]:
    """Version 2 only added ``schema_version`` itself: a version 1 record reads the same."""
    return record


@migrator(2)
def _run_code_version(record: dict[str, Any]) -> dict[str, Any]:
    """Version 3 run records hold the code version the run started on (and its tools' effect
    classes, which older runs simply lack); older runs have none."""
    if record.get("sk") == keys.RUN_RECORD and "code_version" not in record:
        record["code_version"] = UNRECORDED_CODE_VERSION
    return record


@migrator(3)
def _snapshots_reference(record: dict[str, Any]) -> dict[str, Any]:
    """Version 4 snapshots reference their window's records (``longstep.context``) instead of
    copying the context; a version 3 snapshot's state reads as before. The bump keeps a runtime
    of version 3, rolled back to, from misreading a snapshot that holds no state: it refuses the
    record (RecordSchemaError) instead."""
    return record


@migrator(4)
def _payloads_packed_against_a_dictionary(record: dict[str, Any]) -> dict[str, Any]:
    """Version 5 may pack a compressed payload (``result_z``, ``summary_z``, ``state_z``...)
    against a preset dictionary (``longstep.codec``); a version 4 payload is plain zlib, which
    this code reads as before. The bump keeps a runtime of version 4, rolled back to, from
    failing to unpack one: it refuses the record (RecordSchemaError) instead."""
    return record
