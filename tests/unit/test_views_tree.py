"""``longstep_kit.ops.views.tree``: runs arranged as a tree, what a parent parked on its children
waits on, and the cost roll-up, on a store faked in memory."""

from __future__ import annotations

import json
from typing import Any

import pytest

from longstep import keys
from longstep_kit.ops.views.cost import CostEstimate
from longstep_kit.ops.views.status import ESCALATED, RUNNING, SUCCEEDED, WAITING_FOR_APPROVAL, RunState
from longstep_kit.ops.views.tree import arrange, child_runs, descendants, rollup, waiting_on_children


class _Store:
    """The two reads the tree makes: ``get`` and ``query_prefix`` of a partition."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], dict[str, Any]] = {}
        self.gets: list[str] = []

    def get(self, run_id: str, sk: str) -> dict[str, Any] | None:
        self.gets.append(run_id)
        return self.items.get((run_id, sk))

    def query_prefix(self, run_id: str, prefix: str) -> list[dict[str, Any]]:
        return [v for (pk, sk), v in sorted(self.items.items()) if pk == run_id and sk.startswith(prefix)]

    def child(self, parent: str, turn: int, call: int, status: str = "running", failed: bool = False, parked_at: float = 10.0) -> str:
        child_id = f"{parent}-t{turn}c{call}"
        self.items[(parent, f"child#{turn:06d}#{call:03d}")] = {
            "sk": f"child#{turn:06d}#{call:03d}",
            "child_run_id": child_id,
            "subagent": "research",
            "status": status,
            "failed": failed,
            "parked_at": parked_at,
        }
        link = {"run_id": parent, "turn": turn, "call": call, "depth": parent.count("-t") + 1}
        self.items[(child_id, keys.RUN_RECORD)] = {"sk": keys.RUN_RECORD, "parent": json.dumps(link)}
        return child_id


def test_children_sit_under_their_parent_in_the_order_of_its_calls():
    store = _Store()
    a1, a0 = store.child("a", 0, 1), store.child("a", 0, 0)
    grandchild = store.child(a0, 1, 0)
    states = [RunState(r, SUCCEEDED, 0.0) for r in ("b", grandchild, a1, "a", a0)]
    placed = [(depth, s.run_id, parent) for depth, s, parent in arrange(states, store)]
    assert placed == [(0, "b", None), (0, "a", None), (1, a0, "a"), (2, grandchild, a0), (1, a1, "a")]
    assert "b" not in store.gets and "a" not in store.gets  # only runs shaped like a child are looked up


def test_a_top_level_run_named_like_a_child_stays_at_the_top():
    store = _Store()
    states = [RunState("a", SUCCEEDED, 0.0), RunState("a-t0c0", SUCCEEDED, 0.0)]  # no parent link: not a child
    assert [(d, p) for d, _, p in arrange(states, store)] == [(0, None), (0, None)]


def test_descendants_are_depth_first_with_their_status():
    store = _Store()
    a0 = store.child("a", 0, 0, status="done")
    store.child(a0, 1, 0, status="done", failed=True)
    store.child("a", 0, 1)
    assert [(d, c.run_id, c.status) for d, c in descendants(store, "a")] == [
        (1, "a-t0c0", "succeeded"),
        (2, "a-t0c0-t1c0", "failed"),
        (1, "a-t0c1", "running"),
    ]
    assert [c.turn for c in child_runs(store, "a")] == [0, 0]


def test_a_parent_waits_on_the_child_that_waits_for_a_human_first():
    store = _Store()
    store.child("a", 0, 0, parked_at=5.0)
    store.child("a", 0, 1, parked_at=7.0)
    store.child("a", 0, 2, status="done")  # ended: not waited on
    states = {
        "a-t0c0": RunState("a-t0c0", RUNNING, 6.0, "execution a-t0c0, last step turn 0 model"),
        "a-t0c1": RunState("a-t0c1", ESCALATED, 8.0, "ModelTurn turn 1: ModelAccessError"),
    }
    since, detail, _ = waiting_on_children(store, "a", states.get)
    assert since == 5.0
    assert detail == "waiting for 2 child runs: a-t0c1 escalated (ModelTurn turn 1: ModelAccessError); a-t0c0 running"
    states["a-t0c0"] = RunState("a-t0c0", WAITING_FOR_APPROVAL, 6.0, "send_email (turn 0, call 0)")
    assert waiting_on_children(store, "a", states.get)[1].split("; ")[1] == "a-t0c0 waiting_for_approval (send_email (turn 0, call 0))"
    assert waiting_on_children(_Store(), "a", states.get) is None


def _estimate(total: float, infrastructure: float, storage: float) -> CostEstimate:
    return CostEstimate(lines=[], total=total, infrastructure=infrastructure, storage_per_month=storage, model="m", prices_as_of="2025")


def test_the_roll_up_is_the_sum_of_its_runs():
    rolled = rollup([("a", _estimate(3.0, 1.0, 0.5)), ("a-t0c0", _estimate(2.0, 0.5, 0.25)), ("a-t0c1", _estimate(1.0, 0.25, 0.125))])
    assert [r["run_id"] for r in rolled["runs"]] == ["a", "a-t0c0", "a-t0c1"]
    assert (rolled["total"], rolled["infrastructure"], rolled["model"], rolled["storage_per_month"]) == pytest.approx((6.0, 1.75, 4.25, 0.875))
    assert rolled["runs"][1]["model"] == 1.5
