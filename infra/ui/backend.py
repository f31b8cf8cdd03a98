"""What the run UI's routes do, apart from HTTP: list runs, show one, read its events, steer it and
decide its approvals, on the operator's own clients (``RunInspector``, ``EventLog``, ``Steering``
and ``ApprovalService``: the same code as ``longstep runs``, ``watch``, ``send`` and ``approve``).

Every answer is plain JSON data; every error a caller can cause is an :class:`ApiError` with the
HTTP status it is answered with and one line.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from longstep import clock, keys, steering
from longstep.errors import (
    ApprovalAlreadyDecidedError,
    ApprovalExpiredError,
    ApprovalNotFoundError,
    ApprovalStaleError,
    InvalidInputError,
    LongstepError,
)
from longstep.events import EventLog
from longstep.inputs import RUN_ID_PATTERN
from longstep_kit.ops import runs as run_ops
from longstep_kit.ops.steer import RunIsRunningError, RunNotRunningError, Steering
from longstep_kit.ops.views import InspectError
from longstep_kit.ops.views.inspector import RunInspector
from longstep_kit.ops.views.records import json_value
from longstep_kit.ops.views.status import STATUSES, RunState, parse_age
from longstep_kit.ops.views.tree import arrange

PRICES_FILE = Path(__file__).resolve().parent.parent / "prices.json"
MAX_RUNS = 200  # the runs list shows the most recently started ones
# A follower re-reads its run's execution status at most this often (ListExecutions is throttled
# per account; the log itself is polled every 0.5 s).
STATUS_EVERY_SECONDS = 2.0


class ApiError(LongstepError):
    """A request the UI cannot carry out: its HTTP status and one line."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def api_error(exc: Exception) -> ApiError | None:
    """The answer for an error a request caused (a bad field, a finished run...); None for a fault."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, ApprovalNotFoundError) or (isinstance(exc, (InspectError, RunNotRunningError)) and "no run named" in str(exc)):
        return ApiError(404, str(exc))
    if isinstance(exc, (ApprovalAlreadyDecidedError, ApprovalStaleError, RunNotRunningError, RunIsRunningError)):
        return ApiError(409, str(exc))
    if isinstance(exc, ApprovalExpiredError):
        return ApiError(410, str(exc))
    if isinstance(exc, (InvalidInputError, InspectError)):
        return ApiError(400, str(exc))
    return None


def check_run_id(run_id: str) -> str:
    if not RUN_ID_PATTERN.fullmatch(run_id):
        raise ApiError(400, f"run_id: {run_id[:80]!r} is not a run id")
    return run_id


@dataclass(frozen=True)
class RunFilter:
    """The runs list's filters (each optional).

    Attributes:
        search: text in the run id, its agent or its goal (case-insensitive).
        agent: the agent's name, exactly.
        status: one of ``longstep.run_status.STATUSES``.
        age: only runs started within this age (``30m``, ``2h``, ``3d``).
        parent: a run id (its child runs only), or ``none`` (top-level runs only).
    """

    search: str = ""
    agent: str = ""
    status: str = ""
    age: str = ""
    parent: str = ""

    @classmethod
    def from_query(cls, query: dict[str, list[str]]) -> "RunFilter":
        def one(name: str) -> str:
            return (query.get(name) or [""])[0].strip()[:200]

        found = cls(one("q"), one("agent"), one("status"), one("age"), one("parent"))
        if found.status and found.status not in STATUSES:
            raise ApiError(400, f"status: must be one of {', '.join(STATUSES)}")
        if found.age:
            try:
                parse_age(found.age)
            except InspectError as exc:
                raise ApiError(400, f"age: {exc}") from None
        return found


@dataclass
class Backend:
    """The UI's operations on one deployment.

    Args:
        inspector: the runs' views.
        steer: steering (``who`` is recorded with each message, pause and stop).
        approvals: the approval service (None: the stack has no approvals table).
        status_every: how often a follower re-reads the run's execution status, in seconds.
        now: the current time (epoch seconds) for ages.
    """

    inspector: RunInspector
    steer: Steering
    approvals: Any = None
    status_every: float = STATUS_EVERY_SECONDS
    now: Callable[[], float] = clock.now
    _prices: Any = field(default=None, repr=False)

    @property
    def store(self) -> Any:
        return self.steer.store

    @property
    def who(self) -> str:
        return self.steer.who

    # the runs list -----------------------------------------------------------------------------

    def runs(self, where: RunFilter) -> list[dict[str, Any]]:
        """The runs that pass ``where``, most recently started first, children under their parent."""
        now = self.now()
        states = self.inspector.runs(where.status or None)[:MAX_RUNS]
        newer = now - parse_age(where.age) if where.age else None
        rows = []
        for depth, state, parent in arrange(states, self.store):
            record = self.store.get(state.run_id, keys.RUN_RECORD) or {}
            row = self._row(state, record, parent, depth, now)
            if self._passes(row, state, where, newer):
                rows.append(row)
        return rows

    def _row(self, state: RunState, record: dict[str, Any], parent: str | None, depth: int, now: float) -> dict[str, Any]:
        started = state.execution.started if state.execution else float(record.get("created_at") or state.since)
        return {
            "run_id": state.run_id,
            "status": state.status,
            "reason": state.reason,
            "detail": state.detail,
            "agent": str(record.get("agent") or ""),
            "goal": str(record.get("goal") or "")[:300],
            "parent": parent,
            "depth": depth,
            "started": started,
            "since": state.since,
            "age_seconds": round(state.age(now), 3),
        }

    @staticmethod
    def _passes(row: dict[str, Any], state: RunState, where: RunFilter, newer: float | None) -> bool:
        if where.agent and row["agent"] != where.agent:
            return False
        if where.status and row["status"] != where.status:
            return False
        if newer is not None and row["started"] < newer:
            return False
        if where.parent == "none" and row["parent"]:
            return False
        if where.parent and where.parent != "none" and row["parent"] != where.parent:
            return False
        text = where.search.lower()
        return not text or any(text in str(row[k]).lower() for k in ("run_id", "agent", "goal"))

    # one run -----------------------------------------------------------------------------------

    def run(self, run_id: str) -> dict[str, Any]:
        """Where one run stands: status, its record's agent and goal, executions, children, what it waits for."""
        check_run_id(run_id)
        now = self.now()
        state = self.inspector.state(run_id)
        record = self.store.get(run_id, keys.RUN_RECORD) or {}
        final = self.store.get(run_id, keys.FINAL_RECORD)
        output = json_value(final.get("output")) if final else None
        children = [
            {
                "run_id": child.run_id,
                "agent": child.subagent,
                "turn": child.turn,
                "call": child.call,
                "depth": depth,
                "status": s.status if s else child.status,
            }
            for depth, child, s in self.inspector.children(run_id)
        ]
        return {
            "run_id": run_id,
            "status": state.status,
            "reason": state.reason,
            "detail": state.detail,
            "since": state.since,
            "age_seconds": round(state.age(now), 3),
            "agent": str(record.get("agent") or ""),
            "goal": str(record.get("goal") or ""),
            "executions": state.executions,
            "running": bool(state.execution and state.execution.status == "RUNNING"),
            "pause_requested": bool(record.get(steering.PAUSED)),
            "paused": bool(record.get(steering.PAUSE_TOKEN)),
            "stop_requested": bool(record.get(steering.STOP)),
            "output": output if isinstance(output, dict) else None,
            "children": children,
        }

    def cost(self, run_id: str) -> dict[str, Any]:
        """The run's usage and cost estimate, as ``longstep show --cost`` has them (Lambda memory not looked up)."""
        from longstep_kit.ops.views.cost import estimate_cost, load_prices

        check_run_id(run_id)
        if self._prices is None:
            self._prices = load_prices(PRICES_FILE.read_text())
        view = self.inspector.view(run_id)
        return {"usage": view.usage.as_dict(), "cost": estimate_cost(view.usage, self._prices).as_dict()}

    @property
    def log(self) -> EventLog:
        return EventLog(self.store)

    def require(self, run_id: str) -> None:
        """Raises ApiError (404) unless the run has a record or an execution."""
        check_run_id(run_id)
        if self.store.get(run_id, keys.RUN_RECORD) is None and not run_ops.run_executions(self.steer.sfn, self.steer.state_machine_arn, run_id):
            raise ApiError(404, f"run_id: no run named {run_id!r}")

    def status_reader(self, run_id: str, monotonic: Callable[[], float] = time.monotonic) -> Callable[[], str]:
        """The status of the run's latest execution, for ``live.follow``: read again at most every
        ``status_every`` seconds (an ended status is read fresh before it is first returned, so
        the follow's last log read still comes after it)."""
        check_run_id(run_id)
        cached: dict[str, Any] = {}

        def status() -> str:
            if "status" not in cached or monotonic() - cached["read"] >= self.status_every:
                try:
                    cached["status"] = run_ops.latest_execution(self.steer.sfn, self.steer.state_machine_arn, run_id)["status"]
                except run_ops.RunNotFoundError:
                    # Init writes the record inside the execution: a record without one has
                    # outlived its history (ended); neither is a run started, not yet listed.
                    record = self.store.get(run_id, keys.RUN_RECORD)
                    cached["status"] = "RUNNING" if record is None else ("SUCCEEDED" if self.store.get(run_id, keys.FINAL_RECORD) else "FAILED")
                cached["read"] = monotonic()
            return str(cached["status"])

        return status

    # steering ----------------------------------------------------------------------------------

    def send(self, run_id: str, text: Any) -> dict[str, Any]:
        if not isinstance(text, str):
            raise ApiError(400, "text: the message must be a string")
        return {"run_id": run_id, "message": self.steer.send(check_run_id(run_id), text)}

    def pause(self, run_id: str) -> dict[str, Any]:
        return {"run_id": run_id, "changed": self.steer.pause(check_run_id(run_id))}

    def resume(self, run_id: str) -> dict[str, Any]:
        return {"run_id": run_id, "resumed": self.steer.resume(check_run_id(run_id))}

    def stop(self, run_id: str, reason: Any) -> dict[str, Any]:
        reason = reason if isinstance(reason, str) and reason.strip() else "stopped from the run UI"
        return {"run_id": run_id, "stopping": self.steer.stop(check_run_id(run_id), reason[:500])}

    # approvals ---------------------------------------------------------------------------------

    def pending(self, run_id: str) -> list[dict[str, Any]]:
        """The run's approval requests waiting for a decision (never a task token: ``requests.view``)."""
        if self.approvals is None:
            return []
        return self.approvals.list(check_run_id(run_id))

    def decide(self, approval_id: str, body: Any) -> dict[str, Any]:
        """Approve or reject a request (``{"decision": "approve"|"reject", "reason"?}``); the
        operator's identity is the approver."""
        if self.approvals is None:
            raise ApiError(404, "this stack has no approvals table")
        if not isinstance(body, dict) or body.get("decision") not in ("approve", "reject"):
            raise ApiError(400, "decision: must be approve or reject")
        decided = self.approvals.decide(approval_id, {k: v for k, v in body.items() if k in ("decision", "reason")}, f"{self.who} (run UI)")
        return json.loads(json.dumps(decided, default=str))
