"""Views of runs on a deployed stack (or the local stack): ``runs``, ``show`` (with ``--cost``) and
``stuck``. They only read: executions and histories from Step Functions, records from the
checkpoint table, and (for ``--cost``) the functions' memory sizes from Lambda."""

from __future__ import annotations

import time

import argparse
import datetime as dt
import json
from pathlib import Path
from typing import Any

from longstep import clock

PRICES_FILE = Path(__file__).resolve().parent.parent / "prices.json"


# -- formatting -----------------------------------------------------------------------------------


def when(epoch: float | None) -> str:
    """``2026-11-30 12:05:19Z`` (UTC), or ``-``."""
    if not epoch:
        return "-"
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def age(seconds: float | None) -> str:
    """``45s``, ``12m 5s``, ``3h 20m``, ``2d 4h``."""
    if seconds is None:
        return "-"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60}s"
    if s < 86_400:
        return f"{s // 3600}h {s % 3600 // 60}m"
    return f"{s // 86_400}d {s % 86_400 // 3600}h"


def duration(seconds: float | None) -> str:
    """``87 ms``, ``1.42 s``, or an age for long waits."""
    if seconds is None:
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.2f} s"
    return age(seconds)


def size(n: int) -> str:
    """``563 B``, ``12.3 KB``, ``1.4 MB``."""
    if n < 1024:
        return f"{n} B"
    if n < 1024**2:
        return f"{n / 1024:.1f} KB"
    return f"{n / 1024**2:.1f} MB"


def dollars(x: float) -> str:
    """Dollars with enough digits to see sub-cent amounts: ``$0.0304``, ``$0.00000460``."""
    if x == 0:
        return "$0"
    if x >= 1:
        return f"${x:,.2f}"
    digits = max(4, 3 - int(f"{x:e}".split("e")[1]))
    return f"${x:.{digits}f}"


def _n(count: int, one: str, many: str | None = None) -> str:
    return f"{count} {one if count == 1 else many or one + 's'}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    fmt = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return [fmt(header), *(fmt(r) for r in rows)]


# -- the inspector ------------------------------------------------------------------------------


def _inspector(args: argparse.Namespace) -> Any:
    from longstep_kit.cli.aws_cmds import stack_output
    from longstep_kit.cli.errors import CliError
    from longstep_kit.ops.views.inspector import RunInspector

    arn = args.state_machine_arn or stack_output(args, "StateMachineArn")
    table = args.checkpoint_table or stack_output(args, "CheckpointTableName")
    approvals = args.approvals_table
    if approvals is None:
        try:
            approvals = stack_output(args, "ApprovalsTableName")
        except CliError:  # a stack from before the approvals table: approvals are not shown
            approvals = None
    aws = args.aws
    return RunInspector(arn, table, approvals, sfn=aws.client("stepfunctions"), dynamodb=aws.client("dynamodb"), lambda_client=aws.client("lambda"))


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


def _state_row(state: Any, now: float) -> list[str]:
    return [state.run_id, state.status, when(state.since), age(state.age(now)), state.detail]


def _state_json(state: Any, now: float) -> dict[str, Any]:
    return {
        "run_id": state.run_id,
        "status": state.status,
        "since": state.since,
        "age_seconds": round(state.age(now), 3),
        "detail": state.detail,
        "execution": state.execution.name if state.execution else None,
        "executions": state.executions,
    }


# -- commands -------------------------------------------------------------------------------------


def cmd_runs(args: argparse.Namespace) -> int:
    from longstep_kit.cli.tree_views import indented
    from longstep_kit.ops.views.tree import arrange

    now = clock.now()
    inspector = _inspector(args)
    states = inspector.runs(args.status)
    placed = arrange(states, inspector.store)  # subagent runs under their parent
    if args.json:
        print(json.dumps([{**_state_json(s, now), "parent": parent, "depth": depth} for depth, s, parent in placed], indent=2))
        return 0
    if not states:
        print("no runs" + (f" with status {args.status}" if args.status else ""))
        return 0
    rows = []
    for depth, s, parent in placed:
        row = _state_row(s, now)
        row[0] = indented(s.run_id, depth) + (f" (child of {parent})" if parent and depth == 0 else "")
        rows.append(row)
    for line in _table(["RUN", "STATUS", "SINCE", "AGE", "DETAIL"], rows):
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
    states = _inspector(args).stuck(threshold, now)
    if args.json:
        print(json.dumps([_state_json(s, now) for s in states], indent=2))
        return 0
    if not states:
        print(f"no run has waited longer than {args.older_than}")
        return 0
    for line in _table(["RUN", "STATUS", "SINCE", "AGE", "DETAIL"], [_state_row(s, now) for s in states]):
        print(line)
    print(f"\n{len(states)} run{'s' if len(states) != 1 else ''} waiting longer than {args.older_than}")
    return 0


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
        status = follow(inspector, args.run_id, _tool_effects(agent))
        return 0 if status in ("SUCCEEDED", "WAITING") else 1
    from longstep_kit.cli.tree_views import children_json, cost_tree, render_children, render_cost_tree

    view = inspector.view(args.run_id, effects=_tool_effects(agent), memory=args.cost, now=now)
    estimate = estimate_cost(view.usage, prices) if prices is not None else None
    kids = inspector.children(args.run_id)  # the subagent runs below it (longstep.subagents), where each stands
    tree = cost_tree(inspector, args.run_id, estimate, kids, prices, _tool_effects) if estimate is not None and kids else None
    if args.json:
        shown = {**_view_json(view, estimate, now), "children": children_json(kids, now)}
        print(json.dumps(shown | ({"cost_tree": tree} if tree else {}), indent=2, default=str))
        return 0
    for line in render_view(view, now) + render_children(kids, now):
        print(line)
    if estimate is not None:
        print()
        for line in render_cost(view.usage, estimate, args.prices) + (["", *render_cost_tree(tree, kids)] if tree else []):
            print(line)
    return 0


FOLLOW_INTERVAL_SECONDS = 2.0


def _timeline_row(e: Any) -> str:
    name = e.name + (f" [{e.effect}]" if e.effect and e.effect != "read" else "")
    where = f"turn {e.turn}" + ("" if e.call is None else f" call {e.call}")
    return f"{when(e.at)[5:]}  {where:<16} {e.kind:<9} {name:<28} {e.result}"


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
                emit(_timeline_row(e))
        running = any(x.status == "RUNNING" for x in view.executions)
        if not running:
            emit(f"run {run_id}: {view.state.status}" + (f": {view.state.detail}" if view.state.detail else ""))
            return view.state.status
        sleep(interval)


def _agent_of(inspector: Any, run_id: str) -> str | None:
    from longstep import keys

    record = inspector.store.get(run_id, keys.RUN_RECORD)
    return record.get("agent") if record else None


def render_view(view: Any, now: float) -> list[str]:
    """The text of ``longstep show``: status, timeline, last model call and last side effect."""
    state, run, usage = view.state, view.run, view.usage
    lines = [f"run {state.run_id}: {state.status} since {when(state.since)} ({age(state.age(now))})" + (f": {state.detail}" if state.detail else "")]
    if run:
        model = run.get("model") or {}
        model_name = model.get("model_id") or model.get("provider") or "default"
        goal = str(run.get("goal", ""))
        lines.append(f"  agent {run.get('agent')}, model {model_name}, max turns {run.get('max_turns')}")
        lines.append(f"  goal: {goal[:100]}{'...' if len(goal) > 100 else ''}")
        if run.get("code_version"):
            parts = ", ".join(f"{k} {v}" for k, v in sorted((run.get("code_parts") or {}).items()))
            lines.append(f"  code version {run['code_version']}" + (f" ({parts})" if parts else ""))
    for execution in view.executions:
        lines.append(
            f"  execution {execution.name}: {execution.status}, started {when(execution.started)}"
            + (f", stopped {when(execution.stopped)}" if execution.stopped else "")
        )
    lines.append("")
    rows = []
    for e in view.timeline:
        tokens = "-" if e.input_tokens is None else f"{e.input_tokens}/{e.output_tokens}"
        stored = size(e.bytes) + (f" +{size(e.offloaded_bytes)} S3" if e.offloaded_bytes else "")
        name = e.name + (f" [{e.effect}]" if e.effect and e.effect != "read" else "")
        rows.append(
            [
                when(e.at)[5:],
                str(e.turn),
                "-" if e.call is None else str(e.call),
                e.kind,
                name,
                duration(e.seconds) if e.kind in ("model", "tool") else age(e.seconds),
                tokens,
                stored,
                str(e.retries) if e.kind in ("model", "tool") else "-",
                e.result,
            ]
        )
    lines += _table(["TIME (UTC)", "TURN", "CALL", "KIND", "STEP", "DURATION", "TOKENS IN/OUT", "BYTES", "RETRIES", "RESULT"], rows)
    lines.append("")
    lm, le = view.last_model, view.last_effect
    lines.append("last model call:  " + (f"turn {lm.turn} {lm.name} at {when(lm.at)}: {lm.result}" if lm else "none"))
    if le:
        effect = f" [{le.effect}]" if le.effect else ""
        lines.append(f"last side effect: turn {le.turn} call {le.call} {le.name}{effect} at {when(le.at)}: {le.result}")
    else:
        lines.append("last side effect: none")
    lines.append(
        f"totals: {_n(usage.turns, 'model step')}, {_n(usage.tool_calls, 'tool step')}, {_n(usage.retries, 'retry', 'retries')}, "
        f"tokens {usage.input_tokens} in / {usage.output_tokens} out, "
        f"{size(usage.dynamodb_bytes)} in DynamoDB, {size(usage.s3_bytes)} in S3"
    )
    lines += [f"note: {n}" for n in view.notes]
    return lines


def render_cost(usage: Any, estimate: Any, prices_path: str) -> list[str]:
    """The text of ``longstep show --cost``: one line per item, the total, and the storage."""
    quantities = {
        "step functions transitions": f"{usage.billed_transitions} ({usage.state_transitions} entered + {usage.retries} retries)",
        "lambda compute": f"{usage.lambda_gb_seconds:.3f} GB-s ({usage.lambda_seconds:.2f} s)",
        "lambda requests": f"{usage.lambda_invocations} invocations",
        "dynamodb writes": f"{usage.dynamodb_write_units} WRU (estimated)",
        "dynamodb reads": f"{usage.dynamodb_read_units} RRU (estimated)",
        "s3 puts": f"{usage.s3_puts}",
        "s3 gets": f"{usage.s3_gets}",
        "model input tokens": f"{usage.input_tokens} ({estimate.model})",
        "model output tokens": f"{usage.output_tokens}",
    }
    rows = [[line.item, quantities.get(line.item, f"{line.quantity:g}"), _price(line), dollars(line.dollars)] for line in estimate.lines]
    shown = Path(prices_path).resolve()
    shown = shown.relative_to(Path.cwd()) if shown.is_relative_to(Path.cwd()) else shown
    lines = [f"cost estimate (prices of {estimate.prices_as_of} from {shown}):"]
    lines += ["  " + line for line in _table(["ITEM", "QUANTITY", "PRICE", "DOLLARS"], rows)]
    lines.append(
        f"  total {dollars(estimate.total)} (infrastructure {dollars(estimate.infrastructure)}, model {dollars(estimate.total - estimate.infrastructure)})"
    )
    lines.append(
        f"  storage {size(usage.dynamodb_bytes)} DynamoDB + {size(usage.s3_bytes)} S3: {dollars(estimate.storage_per_month)} per month retained (not in the total)"
    )
    return lines


def _price(line: Any) -> str:
    """``$0.025 per 1,000 transitions``, as the price table quotes it."""
    quoted = line.unit_price * line.per
    amount = f"${quoted:g}" if quoted >= 0.01 else f"${quoted:.10f}".rstrip("0")
    if line.per == 1:
        return f"{amount} per {line.unit}"
    return f"{amount} per {'1M' if line.per == 1_000_000 else f'{line.per:,}'} {line.unit}s"


def _view_json(view: Any, estimate: Any, now: float) -> dict[str, Any]:
    from dataclasses import asdict

    out = {
        "state": _state_json(view.state, now),
        "run": view.run,
        "executions": [asdict(e) for e in view.executions],
        "timeline": [asdict(e) for e in view.timeline],
        "last_model_call": asdict(view.last_model) if view.last_model else None,
        "last_side_effect": asdict(view.last_effect) if view.last_effect else None,
        "usage": view.usage.as_dict(),
        "attempts": [asdict(a) for a in view.attempts],
        "notes": view.notes,
    }
    if estimate is not None:
        out["cost"] = estimate.as_dict()
    return out


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

    runs = sub.add_parser("runs", help="list runs and where each stands (running, waiting, escalated, failed, succeeded)")
    runs.add_argument("--status", choices=STATUSES, help="only runs in this status")
    _add_target_options(runs)
    runs.set_defaults(func=cmd_runs)
    show = sub.add_parser("show", help="a run's timeline: each step's kind, duration, tokens, bytes and retries")
    show.add_argument("run_id")
    show.add_argument("--cost", action="store_true", help="estimate the run's cost in dollars")
    show.add_argument("--follow", action="store_true", help="print the steps as they are recorded until the run stops (every 2 s)")
    show.add_argument("--prices", default=str(PRICES_FILE), metavar="FILE", help="price table for --cost (default longstep_kit/prices.json)")
    _add_target_options(show)
    show.set_defaults(func=cmd_show)
    stuck = sub.add_parser("stuck", help="runs waiting for a human or an event for longer than an age")
    stuck.add_argument("--older-than", required=True, type=_age_arg, metavar="AGE", help="e.g. 30m, 2h, 3d, 1h30m")
    _add_target_options(stuck)
    stuck.set_defaults(func=cmd_stuck)
