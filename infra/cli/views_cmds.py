"""Views of runs on a deployed stack (or the local stack): ``runs``, ``show`` (with ``--cost``
and ``--follow``) and ``stuck``. They only read: executions and histories from Step Functions,
records from the checkpoint table, and (for ``--cost``) the functions' memory sizes from Lambda.
What they print is written in ``cli/view_render.py`` (and ``cli/tree_views.py`` for child runs)."""

from __future__ import annotations

import argparse
from dataclasses import asdict
import time
from pathlib import Path
from typing import Any

from longstep import clock
from longstep_kit.cli.formatting import table
from longstep_kit.cli.structured import add_paging, page, print_data
from longstep_kit.cli.view_render import render_cost, render_view, state_json, state_row, timeline_row, view_json

PRICES_FILE = Path(__file__).resolve().parent.parent / "prices.json"


# -- the inspector ------------------------------------------------------------------------------


def _inspector(args: argparse.Namespace) -> Any:
    from longstep_kit.cli.targets import inspector_of

    return inspector_of(args)


def _tool_effects(agent: str | None) -> dict[str, str] | None:
    """Effect class of each tool of ``agent``, from the agents the project's cdk.json registers;
    None when they cannot be loaded (then side effects are told from the records)."""
    if not agent:
        return None
    try:
        from longstep_kit.project import agent_catalog

        resolve_agent = agent_catalog()

        return {name: tool.effect.value for name, tool in resolve_agent(agent).tools.tools.items()}
    except Exception:  # noqa: BLE001 - another deployment's agents: fall back to the records
        return None


# -- commands -------------------------------------------------------------------------------------


def cmd_runs(args: argparse.Namespace) -> int:
    from longstep_kit.cli.tree_views import indented
    from longstep_kit.ops.views.tree import arrange

    if getattr(args, "where", None) or getattr(args, "cursor", None):  # the runs index (longstep_kit.cli.fleet_cmds)
        from longstep_kit.cli.fleet_cmds import cmd_runs_where

        return cmd_runs_where(args)
    now = clock.now()
    inspector = _inspector(args)
    states = page(args, inspector.runs(args.status))
    placed = arrange(states, inspector.store)  # subagent runs under their parent
    if args.json:
        print_data(args, [{**state_json(s, now), "parent": parent, "depth": depth} for depth, s, parent in placed])
        return 0
    if not states:
        print("no runs" + (f" with status {args.status}" if args.status else ""))
        return 0
    rows = []
    for depth, s, parent in placed:
        row = state_row(s, now)
        row[0] = indented(s.run_id, depth) + (f" (child of {parent})" if parent and depth == 0 else "")
        rows.append(row)
    for line in table(["RUN", "STATUS", "SINCE", "AGE", "DETAIL"], rows):
        print(line)
    counts: dict[str, int] = {}
    for s in states:
        counts[s.status] = counts.get(s.status, 0) + 1
    print(f"\n{len(states)} run{'s' if len(states) != 1 else ''}: " + ", ".join(f"{n} {status}" for status, n in counts.items()))
    return 0


def cmd_stuck(args: argparse.Namespace) -> int:
    from longstep_kit.ops.views.status import parse_age

    now = clock.now()
    threshold = parse_age(args.older_than)
    states = page(args, _inspector(args).stuck(threshold, now))
    if args.json:
        print_data(args, [state_json(s, now) for s in states])
        return 0
    if not states:
        print(f"no run has waited longer than {args.older_than}")
        return 0
    for line in table(["RUN", "STATUS", "SINCE", "AGE", "DETAIL"], [state_row(s, now) for s in states]):
        print(line)
    print(f"\n{len(states)} run{'s' if len(states) != 1 else ''} waiting longer than {args.older_than}")
    return 0


def _seconds_arg(text: str) -> float:
    """``--model-wait``: a number of seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--model-wait: {text!r} is not a number of seconds") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"--model-wait: {text!r} must be a finite number of seconds, 0 or more")
    return value


def _model_wait(inspector: Any, view: Any, prices: Any, seconds: float) -> Any:
    """What the model's latency adds to the run (its ModelTurn function's memory, from Lambda)."""
    from longstep_kit.ops.views.cost import model_wait_cost

    function = next((a.function for a in view.attempts if a.state == "ModelTurn"), None)
    return model_wait_cost(view.usage, prices, inspector.memory_mb(function), seconds) if function else None


def cmd_show(args: argparse.Namespace) -> int:
    from longstep_kit.ops.views import InspectError
    from longstep_kit.ops.views.cost import estimate_cost, load_prices

    now = clock.now()
    prices = None
    if args.cost:
        try:
            prices = load_prices(Path(args.prices).read_text())
        except OSError as exc:
            raise InspectError(f"--prices: cannot read {args.prices}: {exc.strerror}") from None
    inspector = _inspector(args)
    agent = _agent_of(inspector, args.run_id)
    if getattr(args, "follow", False):
        from longstep import run_status

        return run_status.exit_code(follow(inspector, args.run_id, _tool_effects(agent)))
    from longstep_kit.cli.tree_views import children_json, cost_tree, render_children, render_cost_tree

    view = inspector.view(args.run_id, effects=_tool_effects(agent), memory=args.cost, now=now)
    estimate = estimate_cost(view.usage, prices) if prices is not None else None
    wait = _model_wait(inspector, view, prices, args.model_wait) if prices is not None else None
    kids = inspector.children(args.run_id)  # the subagent runs below it (longstep.subagents), where each stands
    tree = cost_tree(inspector, args.run_id, estimate, kids, prices, _tool_effects) if estimate is not None and kids else None
    if args.json:
        shown = {**view_json(view, estimate, now), "children": children_json(kids, now)}
        shown |= {"model_wait": asdict(wait)} if wait is not None else {}
        print_data(args, shown | ({"cost_tree": tree} if tree else {}))
        return 0
    for line in render_view(view, now) + render_children(kids, now):
        print(line)
    if estimate is not None:
        print()
        for line in render_cost(view.usage, estimate, args.prices, wait) + (["", *render_cost_tree(tree, kids)] if tree else []):
            print(line)
    return 0


FOLLOW_INTERVAL_SECONDS = 2.0


def follow(
    inspector: Any, run_id: str, effects: dict[str, str] | None, interval: float = FOLLOW_INTERVAL_SECONDS, sleep: Any = time.sleep, emit: Any = print
) -> str:
    """Print the run's steps as they are recorded until its latest execution stops; returns its status.

    The records are read again every ``interval`` seconds (the checkpoint table is the source:
    against AWS and the local server alike); a step is printed once.
    """
    seen: set[tuple[Any, ...]] = set()
    while True:
        view = inspector.view(run_id, effects=effects, memory=False, now=clock.now())
        for e in view.timeline:
            key = (e.turn, e.call, e.kind, e.name, e.at)
            if key not in seen:
                seen.add(key)
                emit(timeline_row(e))
        running = any(x.status == "RUNNING" for x in view.executions)
        if not running:
            emit(f"run {run_id}: {view.state.status}" + (f": {view.state.detail}" if view.state.detail else ""))
            return view.state.status
        sleep(interval)


def _agent_of(inspector: Any, run_id: str) -> str | None:
    from longstep import keys

    record = inspector.store.get(run_id, keys.RUN_RECORD)
    return record.get("agent") if record else None


# -- registration ---------------------------------------------------------------------------------


def _add_target_options(p: argparse.ArgumentParser) -> None:
    from longstep_kit.cli.aws_cmds import add_stack_options

    add_stack_options(p)
    p.add_argument("--checkpoint-table", help="use this checkpoint table instead of the stack's")
    p.add_argument("--approvals-table", help="use this approvals table instead of the stack's")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _age_arg(text: str) -> str:
    from longstep_kit.ops.views import InspectError
    from longstep_kit.ops.views.status import parse_age

    try:
        parse_age(text)
    except InspectError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def register(sub: Any) -> None:
    from longstep_kit.ops.views.status import STATUSES

    runs = sub.add_parser("runs", help="list runs and where each stands (running, paused, waiting, escalated, succeeded, stopped, failed...)")

    add_paging(runs)
    runs.add_argument("--status", type=str.lower, choices=STATUSES, help="only runs in this status (any case: RUNNING or running)")
    _add_target_options(runs)
    from longstep_kit.cli.fleet_cmds import add_where_options

    add_where_options(runs)
    runs.set_defaults(func=cmd_runs)
    show = sub.add_parser("show", help="a run's timeline: each step's kind, duration, tokens, bytes and retries")
    show.add_argument("run_id")
    show.add_argument("--cost", action="store_true", help="estimate the run's cost in dollars")
    show.add_argument("--follow", action="store_true", help="print the steps as they are recorded until the run stops (every 2 s)")
    show.add_argument(
        "--model-wait",
        type=_seconds_arg,
        default=0.0,
        metavar="SECONDS",
        help="with --cost: also price each model call's wait at SECONDS (a scripted local run's model answers at once)",
    )
    show.add_argument("--prices", default=str(PRICES_FILE), metavar="FILE", help="price table for --cost (default longstep_kit/prices.json)")
    _add_target_options(show)
    show.set_defaults(func=cmd_show)
    stuck = sub.add_parser("stuck", help="runs waiting for a human or an event for longer than an age")
    add_paging(stuck)
    stuck.add_argument("--older-than", required=True, type=_age_arg, metavar="AGE", help="e.g. 30m, 2h, 3d, 1h30m")
    _add_target_options(stuck)
    stuck.set_defaults(func=cmd_stuck)
