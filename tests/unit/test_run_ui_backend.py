"""The run UI's backend on its own (an in-memory store, a stub inspector): the runs list's filters
(search, agent, status with stopped and paused, age, parent), the status a person reads (the
inspector's, in ``longstep.run_status``'s words, as ``longstep runs`` prints it), and the errors a
request can cause mapped to HTTP statuses."""

from __future__ import annotations

import json

import pytest

from longstep import keys, steering
from longstep.errors import ApprovalExpiredError, BadRequestError
from longstep.inmemory import InMemoryStore
from longstep_kit.ops.steer import RunNotRunningError
from longstep_kit.ops.views.history import Execution
from longstep_kit.ops.views.status import PAUSED, RUNNING, STOPPED, SUCCEEDED, RunState
from longstep_kit.ui.backend import ApiError, Backend, RunFilter, api_error

NOW = 1_800_000_000.0


class _Inspector:
    def __init__(self, states):
        self.states = states
        self.asked = []

    def runs(self, status=None):
        self.asked.append(status)
        return [s for s in self.states if status is None or s.status == status]


class _Steering:
    def __init__(self, store):
        self.store = store
        self.who = "tester"


def _state(run_id, status, started_ago):
    started = NOW - started_ago
    execution = Execution(
        run_id,
        f"arn:{run_id}",
        "RUNNING" if status in (RUNNING, PAUSED) else "SUCCEEDED",
        started,
        None if status in (RUNNING, PAUSED) else started + 1,
    )
    return RunState(run_id, status, started, "", execution, 1)


@pytest.fixture
def backend():
    store = InMemoryStore()
    runs = {
        "triage-1": ("triage", "Triage the checkout incident", RUNNING, 60),
        "triage-2": ("triage", "Triage the search incident", SUCCEEDED, 3 * 86_400),
        "lead-1": ("lead", "Survey durable agents", RUNNING, 600),
        "lead-1-t0c1": ("research", "Find papers", RUNNING, 500),
        "paused-1": ("triage", "A paused one", PAUSED, 30),
        "stopped-1": ("triage", "A stopped one", STOPPED, 20),
    }
    for run_id, (agent, goal, _, _) in runs.items():
        store.put(run_id, keys.RUN_RECORD, {"agent": agent, "goal": goal})
    store.put(
        "lead-1-t0c1", keys.RUN_RECORD, {"agent": "research", "goal": "Find papers", "parent": json.dumps({"run_id": "lead-1", "turn": 0, "call": 1})}
    )
    store.update("paused-1", keys.RUN_RECORD, {steering.PAUSED: True, steering.PAUSE_TOKEN: "token"})
    store.put("stopped-1", keys.FINAL_RECORD, {"output": json.dumps({"status": "STOPPED", "stop_reason": "wrong queue"})})
    store.put("triage-2", keys.FINAL_RECORD, {"output": json.dumps({"status": "SUCCEEDED"})})
    inspector = _Inspector([_state(run_id, status, ago) for run_id, (_, _, status, ago) in runs.items()])
    return Backend(inspector, _Steering(store), now=lambda: NOW)  # type: ignore[arg-type]


def _ids(backend, **where):
    return [row["run_id"] for row in backend.runs(RunFilter(**where))]


def test_the_status_a_person_reads(backend):
    shown = {row["run_id"]: row["status"] for row in backend.runs(RunFilter())}
    assert shown == {
        "triage-1": "running",
        "triage-2": "succeeded",
        "lead-1": "running",
        "lead-1-t0c1": "running",
        "paused-1": "paused",
        "stopped-1": "stopped",
    }


def test_the_filters(backend):
    assert set(_ids(backend, agent="triage")) == {"triage-1", "triage-2", "paused-1", "stopped-1"}
    assert _ids(backend, status="stopped") == ["stopped-1"] and backend.inspector.asked[-1] == "stopped"
    assert _ids(backend, status="succeeded") == ["triage-2"]  # a stopped run is not shown as succeeded
    assert _ids(backend, status="paused") == ["paused-1"] and backend.inspector.asked[-1] == "paused"
    assert "paused-1" not in _ids(backend, status="running")
    assert set(_ids(backend, age="2h")) == {"triage-1", "lead-1", "lead-1-t0c1", "paused-1", "stopped-1"}
    assert set(_ids(backend, age="45s")) == {"paused-1", "stopped-1"}
    assert _ids(backend, parent="lead-1") == ["lead-1-t0c1"]
    assert "lead-1-t0c1" not in _ids(backend, parent="none") and "lead-1" in _ids(backend, parent="none")
    assert set(_ids(backend, search="INCIDENT")) == {"triage-1", "triage-2"}  # in the goal, any case
    assert _ids(backend, search="research") == ["lead-1-t0c1"]  # in the agent
    rows = backend.runs(RunFilter())
    child = next(r for r in rows if r["run_id"] == "lead-1-t0c1")
    assert child["depth"] == 1 and child["parent"] == "lead-1"
    assert rows.index(child) == rows.index(next(r for r in rows if r["run_id"] == "lead-1")) + 1  # right under its parent


def test_a_bad_filter_is_one_line_and_400():
    with pytest.raises(ApiError, match="status: must be one of") as bad:
        RunFilter.from_query({"status": ["sleeping"]})
    assert bad.value.status == 400
    with pytest.raises(ApiError, match="age: 'soon' is not an age"):
        RunFilter.from_query({"age": ["soon"]})
    assert RunFilter.from_query({"q": [" triage "], "parent": ["none"]}) == RunFilter(search="triage", parent="none")


def test_errors_map_to_http_statuses():
    assert api_error(RunNotRunningError("run r is succeeded: there is nothing to pause")).status == 409
    assert api_error(RunNotRunningError("run_id: no run named 'r'")).status == 404
    assert api_error(ApprovalExpiredError("approval a expired")).status == 410
    assert api_error(BadRequestError("reason", "a reason is required to reject")).status == 400
    assert api_error(RuntimeError("a fault")) is None  # a 500, logged


def test_the_pages_status_list_is_the_vocabulary():
    """The runs list's status filter offers exactly ``longstep.run_status.STATUSES``, in order."""
    import re
    from importlib import resources

    from longstep import run_status

    script = resources.files("longstep_kit.ui").joinpath("static", "ui.js").read_text()
    listed = re.search(r"const STATUSES = \[([^\]]*)\]", script)
    assert listed is not None
    assert tuple(json.loads(f"[{listed.group(1)}]")) == run_status.STATUSES
    assert run_status.PAUSE_TOKEN == steering.PAUSE_TOKEN
