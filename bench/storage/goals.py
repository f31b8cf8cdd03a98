"""The storage bench's goals (issue 5), checked against the measured numbers, and stated in the report.

A re-run after the runtime changes re-checks them, so the verdicts in ``bench/RESULTS.md`` always
follow the numbers in ``bench/results/storage.json``.
"""

from __future__ import annotations

from typing import Any

from bench.storage.figures import count, has_bytes, mb, result, times

# A resume "costs the same" when requests and items do not grow and bytes grow at most this much
# (the bytes of a bounded window still depend on what the last turns happened to hold).
RESUME_BYTES_TOLERANCE = 1.25
# Issue 10: a cold model turn reads the run record and one Query.
RESUME_MAX_REQUESTS = 2
# Issue 28: stored bytes within this of the floor (``session.floor_bytes``), and at least this many
# times below LangGraph + DeltaChannel at 200 turns.
FLOOR_MAX_RATIO = 1.2
DELTA_MIN_FACTOR = 20


def evaluate(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's goals, each with ``met`` (True/False, or None when it could not be measured)."""
    goals: list[dict[str, Any]] = []
    ls200, full200, delta200 = result(doc, 200, "longstep"), result(doc, 200, "full_snapshot"), result(doc, 200, "langgraph_delta")

    goal: dict[str, Any] = {"id": "vs_full_snapshots", "goal": "Longstep at least 200x smaller than full snapshots (200 turns); aim 500x"}
    if has_bytes(ls200) and has_bytes(full200):
        ratio = full200["bytes"] / ls200["bytes"]
        goal.update(met=ratio >= 200, measured=round(ratio, 1), stretch_met=ratio >= 500)
        if ratio < 200:
            goal["gap"] = (
                f"{times(ratio)} smaller, not 200x: Longstep must store at most {mb(full200['bytes'] / 200)}, it stores {mb(ls200['bytes'])} ({ls200['bytes'] / (full200['bytes'] / 200):.1f}x too much)"
            )
    else:
        goal.update(met=None, gap="not measured (a run failed or was skipped)")
    goals.append(goal)

    goal = {"id": "vs_langgraph_delta", "goal": "Longstep at most 1/3 of LangGraph + DeltaChannel (200 turns); aim 1/10"}
    if has_bytes(ls200) and has_bytes(delta200):
        frac = ls200["bytes"] / delta200["bytes"]
        goal.update(met=frac <= 1 / 3, measured=round(frac, 3), stretch_met=frac <= 0.1)
        if frac > 1 / 3:
            goal["gap"] = (
                f"Longstep stores {frac:.2f} of LangGraph + DeltaChannel's bytes, not 1/3: at most {mb(delta200['bytes'] / 3)}, it stores {mb(ls200['bytes'])} ({frac * 3:.1f}x too much)"
            )
    elif result(doc, 200, "langgraph_delta") and "unavailable" in result(doc, 200, "langgraph_delta"):
        goal.update(met=None, gap=result(doc, 200, "langgraph_delta")["unavailable"])
    else:
        goal.update(met=None, gap="not measured (a run failed or was skipped)")
    goals.append(goal)

    goals += _issue_28(doc, ls200, delta200)

    ls1000 = result(doc, 1000, "longstep")
    goal = {"id": "resume_bounded", "goal": "Longstep's resume cost the same at 1,000 turns as at 200"}
    if has_bytes(ls200) and has_bytes(ls1000):
        a, b = ls200["resume"], ls1000["resume"]
        met = b["requests"] <= a["requests"] and b["items_read"] <= a["items_read"] and b["bytes_read"] <= RESUME_BYTES_TOLERANCE * a["bytes_read"]
        goal.update(
            met=met,
            measured={"200": a, "1000": b},
        )
        if not met:
            goal["gap"] = (
                f"resume grows with the run: {a['requests']} -> {b['requests']} requests, "
                f"{count(a['items_read'])} -> {count(b['items_read'])} items, {mb(a['bytes_read'])} -> {mb(b['bytes_read'])} "
                f"({b['bytes_read'] / max(1, a['bytes_read']):.1f}x) from 200 to 1,000 turns"
            )
    else:
        goal.update(met=None, gap="not measured (needs Longstep at 200 and 1,000 turns)")
    goals.append(goal)

    goal = {"id": "resume_every_turn", "goal": "Longstep's cold resume reads at most 2 DynamoDB requests at every turn (issue 10)"}
    measured_runs = {
        t: r["resume_every_turn"]
        for t, r in ((t, result(doc, int(t), "longstep")) for t in doc["results"])
        if has_bytes(r) and "resume_every_turn" in r
    }
    if measured_runs:
        worst = {t: m["max_requests"] for t, m in measured_runs.items()}
        goal.update(met=all(v <= RESUME_MAX_REQUESTS for v in worst.values()), measured={t: m["turns_by_requests"] for t, m in measured_runs.items()})
        if not goal["met"]:
            goal["gap"] = "turns needing more: " + "; ".join(f"{t} turns: {m['turns_by_requests']}" for t, m in measured_runs.items())
    else:
        goal.update(met=None, gap="not measured (needs Longstep with the per-turn resume measurement)")
    goals.append(goal)

    goal = {"id": "context_budget", "goal": "Longstep's live context never above the budget"}
    runs = [(t, result(doc, int(t), "longstep")) for t in doc["results"]]
    runs = [(t, r) for t, r in runs if has_bytes(r)]
    if runs:
        budgets = {r["context_budget_tokens"] for _, r in runs}
        peak = max(runs, key=lambda tr: tr[1]["max_context_tokens"])
        if budgets == {None}:
            goal.update(
                met=False,
                measured={t: r["max_context_tokens"] for t, r in runs},
                budget=None,
                gap=f"the runtime has no context budget yet (no context_budget_tokens setting): the context grows with the run, up to {count(peak[1]['max_context_tokens'])} tokens at {peak[0]} turns",
            )
        else:
            over = {t: r["context"]["over_budget_calls"] for t, r in runs}
            goal.update(
                met=all(v == 0 for v in over.values()),
                measured={t: r["max_context_tokens"] for t, r in runs},
                budget=sorted(b for b in budgets if b is not None),
            )
            if not goal["met"]:
                goal["gap"] = f"model calls over the budget: {over}"
    else:
        goal.update(met=None, gap="not measured")
    goals.append(goal)
    return goals


def _issue_28(doc: dict[str, Any], ls200: dict[str, Any] | None, delta200: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Issue 28's storage goals: near the floor at 200 and 1,000 turns, 20x below DeltaChannel."""
    goal: dict[str, Any] = {"id": "vs_floor", "goal": f"Longstep within {FLOOR_MAX_RATIO}x of the floor at 200 and 1,000 turns (issue 28)"}
    ratios = {}
    for turns in (200, 1000):
        entry, floor = result(doc, turns, "longstep"), doc.get("sessions", {}).get(str(turns), {}).get("floor_bytes")
        if has_bytes(entry) and floor:
            ratios[str(turns)] = round(entry["bytes"] / floor, 3)
    if len(ratios) == 2:
        goal.update(met=all(r <= FLOOR_MAX_RATIO for r in ratios.values()), measured=ratios)
        if not goal["met"]:
            goal["gap"] = "; ".join(f"{int(t):,} turns: {r:.2f}x the floor" for t, r in ratios.items() if r > FLOOR_MAX_RATIO)
    else:
        goal.update(met=None, measured=ratios or None, gap="not measured (needs Longstep and the floor at 200 and 1,000 turns)")
    out = [goal]
    goal = {"id": "vs_langgraph_delta_20x", "goal": f"Longstep at least {DELTA_MIN_FACTOR}x below LangGraph + DeltaChannel (200 turns; issue 28)"}
    if has_bytes(ls200) and has_bytes(delta200):
        factor = delta200["bytes"] / ls200["bytes"]
        goal.update(met=factor >= DELTA_MIN_FACTOR, measured=round(factor, 1))
        if factor < DELTA_MIN_FACTOR:
            goal["gap"] = (
                f"{factor:.1f}x below, not {DELTA_MIN_FACTOR}x: at most {mb(delta200['bytes'] / DELTA_MIN_FACTOR)}, it stores {mb(ls200['bytes'])}"
            )
    else:
        goal.update(met=None, gap="not measured (a run failed or was skipped)")
    out.append(goal)
    return out


def _verdict(goal: dict[str, Any]) -> str:
    if goal["met"] is None:
        return "**not measured**"
    return "**met**" if goal["met"] else "**NOT met**"


def goal_lines(goals: list[dict[str, Any]]) -> list[str]:
    """The report's goals section: a row per goal (what was measured, the verdict), then the gaps."""
    out = [
        "### Goals (issues 5 and 28)",
        "",
        "| goal | measured | verdict |",
        "|---|---|---|",
    ]
    for g in goals:
        if g["id"] == "vs_full_snapshots" and "measured" in g:
            measured = f"{times(g['measured'])} smaller" + (" (500x stretch met)" if g.get("stretch_met") else "")
        elif g["id"] == "vs_langgraph_delta" and "measured" in g:
            measured = f"{g['measured']:.3f} of LangGraph + DeltaChannel (1/{1 / g['measured']:.1f})" + (
                " (1/10 stretch met)" if g.get("stretch_met") else ""
            )
        elif g["id"] == "vs_floor" and g.get("measured"):
            measured = "; ".join(f"{int(t):,} turns: {r:.2f}x the floor" for t, r in g["measured"].items())
        elif g["id"] == "vs_langgraph_delta_20x" and "measured" in g:
            measured = f"{g['measured']:.1f}x below"
        elif g["id"] == "resume_bounded" and "measured" in g:
            a, b = g["measured"]["200"], g["measured"]["1000"]
            measured = f"200 turns: {a['requests']} requests, {count(a['items_read'])} items, {mb(a['bytes_read'])}; 1,000 turns: {b['requests']} requests, {count(b['items_read'])} items, {mb(b['bytes_read'])}"
        elif g["id"] == "resume_every_turn" and "measured" in g:
            measured = "; ".join(
                f"{int(t):,} turns: " + ", ".join(f"{count(n)} turns at {r} requests" for r, n in m.items()) for t, m in g["measured"].items()
            )
        elif g["id"] == "context_budget" and "measured" in g:
            budget = "no budget" if g.get("budget") is None else "budget " + " / ".join(count(b) for b in g["budget"]) + " tokens"
            measured = "max " + ", ".join(f"{count(v)} tokens at {t} turns" for t, v in g["measured"].items()) + f"; {budget}"
        else:
            measured = "-"
        out.append(f"| {g['goal']} | {measured} | {_verdict(g)} |")
    gaps = [g for g in goals if g.get("gap") and g["met"] is not True]
    if gaps:
        out += ["", "Gaps, plainly:", ""]
        out += [f"- **{g['goal']}**: {g['gap']}." for g in gaps]
    return out
