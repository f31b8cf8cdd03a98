"""Trees of runs: a run and the subagent runs it started (``longstep.subagents``), as the views
show them: ``runs`` indents children under their parent, ``show`` of a parent lists its children
with where each stands, and a parent that waits on its children says what they wait for.

A child is known from both sides: the parent's ``child#<turn>#<call>`` records name it (and say
whether it ended), and the child's run record holds its parent link. ``runs`` reads the link
only of runs whose id has a child's shape (``-t<turn>c<call>``: ``longstep.subagents.child_run_id``),
one read each, so that a listing of top-level runs costs nothing more.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from longstep import keys
from longstep.contract.run import RunRecord
from longstep.store import CheckpointStore
from longstep.subagents import CHILD_PREFIX
from longstep_kit.ops.views.status import ESCALATED, WAITING_FOR_APPROVAL, WAITING_STATUSES, RunState

_CHILD_SHAPE = re.compile(r"-t\d+c\d+$")
# The record statuses of a child (``longstep.child_runs``): "running" until it ends, then "done".
CHILD_RUNNING = "running"


@dataclass(frozen=True)
class ChildRun:
    """A child run as its parent's record names it.

    Attributes:
        run_id: the child's run id.
        subagent: the agent it runs.
        turn: the parent's turn that delegated.
        call: the delegating call of that turn.
        status: ``running``, ``succeeded`` or ``failed`` (the parent's record: what the parent knows).
        parked_at: when the parent's call began waiting for it (epoch seconds).
    """

    run_id: str
    subagent: str
    turn: int
    call: int
    status: str
    parked_at: float


def child_runs(store: CheckpointStore, run_id: str) -> list[ChildRun]:
    """The child runs ``run_id`` started, in the order of its calls."""
    out = []
    for record in store.query_prefix(run_id, CHILD_PREFIX):
        if not record.get("child_run_id"):
            continue
        turn, call = record["sk"][len(CHILD_PREFIX) :].split("#")
        ended = record.get("status") == "done"
        status = ("failed" if record.get("failed") else "succeeded") if ended else CHILD_RUNNING
        out.append(
            ChildRun(str(record["child_run_id"]), str(record.get("subagent", "")), int(turn), int(call), status, float(record.get("parked_at") or 0))
        )
    return out


def descendants(store: CheckpointStore, run_id: str) -> list[tuple[int, ChildRun]]:
    """Every run below ``run_id`` (children, theirs too), depth first, with its depth (1: a child)."""
    out: list[tuple[int, ChildRun]] = []

    def walk(parent: str, depth: int) -> None:
        for child in child_runs(store, parent):
            out.append((depth, child))
            walk(child.run_id, depth + 1)

    walk(run_id, 1)
    return out


def parent_of(store: CheckpointStore, run_id: str) -> tuple[str, int, int] | None:
    """``(parent run id, turn, call)`` of a child run, from its run record's link; None for a top-level run."""
    if not _CHILD_SHAPE.search(run_id):
        return None
    stored = store.get(run_id, keys.RUN_RECORD)
    link = RunRecord.from_dict(stored).parent if stored else None
    if link is None:
        return None
    return link.run_id, link.turn, link.call


def arrange(states: list[RunState], store: CheckpointStore) -> list[tuple[int, RunState, str | None]]:
    """``runs`` as a tree: ``(depth, state, parent run id)``, each child right under its parent
    (in the order of the parent's calls). A child whose parent is not listed (a ``--status``
    filter left it out) stays at the top level, with its parent named."""
    listed = {s.run_id for s in states}
    links = {s.run_id: parent_of(store, s.run_id) for s in states}
    below: dict[str, list[RunState]] = {}
    for s in states:
        link = links[s.run_id]
        if link is not None and link[0] in listed:
            below.setdefault(link[0], []).append(s)
    out: list[tuple[int, RunState, str | None]] = []

    def place(state: RunState, depth: int) -> None:
        link = links[state.run_id]
        out.append((depth, state, link[0] if link else None))
        for child in sorted(below.get(state.run_id, []), key=lambda c: links[c.run_id][1:]):  # type: ignore[index]
            place(child, depth + 1)

    for s in states:
        link = links[s.run_id]
        if link is None or link[0] not in listed:
            place(s, 0)
    return out


def waiting_on_children(store: CheckpointStore, run_id: str, state_of: Callable[[str], RunState | None]) -> tuple[float, str, list[RunState]] | None:
    """What a running parent waits for when it waits on child runs: ``(since, detail, their states)``.

    A child that waits for a human comes first in the detail (an escalation, then an approval):
    it is what the parent really waits on. None when no child runs.

    Args:
        store: the checkpoint store.
        run_id: the parent.
        state_of: where a child run stands (None when it cannot be told).
    """
    running = [c for c in child_runs(store, run_id) if c.status == CHILD_RUNNING]
    if not running:
        return None
    states = [s for s in (state_of(c.run_id) for c in running) if s is not None]
    order = {ESCALATED: 0, WAITING_FOR_APPROVAL: 1}
    states.sort(key=lambda s: (order.get(s.status, 2), s.run_id))
    parts = [f"{s.run_id} {s.status}" + (f" ({s.detail})" if s.status in WAITING_STATUSES and s.detail else "") for s in states]
    since = min(c.parked_at for c in running)
    noun = "child run" if len(running) == 1 else f"{len(running)} child runs"
    return since, f"waiting for {noun}: " + "; ".join(parts or [c.run_id for c in running]), states


def rollup(parts: list[tuple[str, Any]]) -> dict[str, Any]:
    """The cost of a tree of runs: each run's estimate and their sum.

    Args:
        parts: ``(run id, cost.CostEstimate)`` of the run first, then of each descendant.

    Returns:
        ``{"total", "infrastructure", "model", "storage_per_month", "runs": [{"run_id", "total", ...}]}``;
        every sum is the sum of the runs' own.
    """
    runs = [
        {
            "run_id": run_id,
            "total": e.total,
            "infrastructure": e.infrastructure,
            "model": e.total - e.infrastructure,
            "storage_per_month": e.storage_per_month,
        }
        for run_id, e in parts
    ]
    return {
        "total": sum(r["total"] for r in runs),
        "infrastructure": sum(r["infrastructure"] for r in runs),
        "model": sum(r["model"] for r in runs),
        "storage_per_month": sum(r["storage_per_month"] for r in runs),
        "runs": runs,
    }
