"""The tree parts of ``runs`` and ``show``: subagent runs under their parent, where each stands,
and ``show --cost`` rolled up over a run and its child runs (``longstep_kit.ops.views.tree``)."""

from __future__ import annotations

from typing import Any

from longstep_kit.cli.formatting import age, dollars, table, when
from longstep_kit.cli.view_render import state_json
from longstep_kit.ops.views.tree import ChildRun, rollup


def indented(run_id: str, depth: int) -> str:
    """A run id as the RUN column shows it: a child two spaces in per level, behind a ``└``."""
    return run_id if depth == 0 else "  " * (depth - 1) + "└ " + run_id


def children_json(kids: list[tuple[int, ChildRun, Any]], now: float) -> list[dict[str, Any]]:
    """``show --json``'s ``children``: each child run, its depth, and where it stands now."""
    return [
        {
            "turn": child.turn,
            "call": child.call,
            "subagent": child.subagent,
            "child_run_id": child.run_id,
            "status": child.status,
            "depth": depth,
            "state": state_json(state, now) if state is not None else None,
        }
        for depth, child, state in kids
    ]


def render_children(kids: list[tuple[int, ChildRun, Any]], now: float) -> list[str]:
    """The lines of ``longstep show`` naming the runs below a run (none: no lines). A child still
    running says where it stands: an escalation or approval it waits on is what its parent waits on."""
    lines = [""] if kids else []
    for depth, child, state in kids:
        ended = state.status if state is not None and child.status != "running" else child.status  # a stopped child: stopped
        line = "  " * (depth - 1) + f"child run {child.run_id}: {child.subagent} for turn {child.turn} call {child.call}, {ended}"
        if child.status == "running" and state is not None:
            line += f"; now {state.status} since {when(state.since)} ({age(state.age(now))})" + (f": {state.detail}" if state.detail else "")
        lines.append(line)
    return lines


def cost_tree(inspector: Any, run_id: str, estimate: Any, kids: list[tuple[int, ChildRun, Any]], prices: Any, effects_of: Any) -> dict[str, Any]:
    """The cost of ``run_id`` (its ``estimate``) and of every run below it, rolled up (``tree.rollup``)."""
    from longstep_kit.ops.views.cost import estimate_cost

    parts = [(run_id, estimate)]
    for _, child, _ in kids:
        view = inspector.view(child.run_id, effects=effects_of(child.subagent), memory=True)
        parts.append((child.run_id, estimate_cost(view.usage, prices)))
    return rollup(parts)


def render_cost_tree(tree: dict[str, Any], kids: list[tuple[int, ChildRun, Any]]) -> list[str]:
    """``show --cost`` of a parent: one line per run of the tree, and their sum."""
    depths = [0] + [depth for depth, _, _ in kids]
    rows = [
        [indented(r["run_id"], d), dollars(r["total"]), dollars(r["infrastructure"]), dollars(r["model"]), dollars(r["storage_per_month"])]
        for d, r in zip(depths, tree["runs"])
    ]
    rows.append(["tree total", dollars(tree["total"]), dollars(tree["infrastructure"]), dollars(tree["model"]), dollars(tree["storage_per_month"])])
    lines = [f"cost of the run and its {len(kids)} child run{'s' if len(kids) != 1 else ''}:"]
    return lines + ["  " + line for line in table(["RUN", "TOTAL", "INFRASTRUCTURE", "MODEL", "STORAGE/MONTH"], rows)]
