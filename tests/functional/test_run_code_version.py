"""Init records the code version the run started on; a resumed run keeps it."""

from __future__ import annotations

import json

from longstep import keys
from longstep.store import CheckpointStore
from tests.functional.conftest import handler, load_event


def test_the_run_record_holds_the_code_version_the_run_started_on(aws):
    from agents.triage import build
    from longstep.code_version import code_parts, code_version

    handler("init_run")(load_event("init_run"))
    store = CheckpointStore("checkpoints", aws["ddb"])
    record = store.get("func-run-1", keys.RUN_RECORD)
    parts = code_parts(build())
    assert record["code_version"] == code_version(parts)
    assert json.loads(record["code_parts"]) == parts
    # A resume attaches to the run: the record, and the version it started on, stay as they were.
    store.update("func-run-1", keys.RUN_RECORD, {"code_version": "older"})
    assert handler("init_run")(load_event("init_run"))["resumed"] is True
    assert store.get("func-run-1", keys.RUN_RECORD)["code_version"] == "older"
