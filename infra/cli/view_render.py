"""What the view commands print of a run (``longstep_kit.ops.views``): a state's row and JSON for
``runs`` and ``stuck``, a timeline step's line for ``show --follow``, and the text and JSON of
``show`` and ``show --cost``."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from longstep_kit.cli.formatting import age, count, dollars, duration, size, table, when


def state_row(state: Any, now: float) -> list[str]:
    """A run's row in ``runs`` and ``stuck``: RUN, STATUS, SINCE, AGE, DETAIL."""
    return [state.run_id, state.status, when(state.since), age(state.age(now)), state.detail]


def state_json(state: Any, now: float) -> dict[str, Any]:
    """Where a run stands, as ``--json`` prints it."""
    return {
        "run_id": state.run_id,
        "status": state.status,
        "reason": state.reason,
        "since": state.since,
        "age_seconds": round(state.age(now), 3),
        "detail": state.detail,
        "execution": state.execution.name if state.execution else None,
        "executions": state.executions,
    }


def timeline_row(e: Any) -> str:
    """One step of a run's timeline, as ``show --follow`` prints it."""
    name = e.name + (f" [{e.effect}]" if e.effect and e.effect != "read" else "")
    where = f"turn {e.turn}" + ("" if e.call is None else f" call {e.call}")
    return f"{when(e.at)[5:]}  {where:<16} {e.kind:<9} {name:<28} {e.result}"


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
    lines += table(["TIME (UTC)", "TURN", "CALL", "KIND", "STEP", "DURATION", "TOKENS IN/OUT", "BYTES", "RETRIES", "RESULT"], rows)
    lines.append("")
    lm, le = view.last_model, view.last_effect
    lines.append("last model call:  " + (f"turn {lm.turn} {lm.name} at {when(lm.at)}: {lm.result}" if lm else "none"))
    if le:
        effect = f" [{le.effect}]" if le.effect else ""
        lines.append(f"last side effect: turn {le.turn} call {le.call} {le.name}{effect} at {when(le.at)}: {le.result}")
    else:
        lines.append("last side effect: none")
    lines.append(
        f"totals: {count(usage.turns, 'model step')}, {count(usage.tool_calls, 'tool step')}, {count(usage.retries, 'retry', 'retries')}, "
        f"tokens {usage.input_tokens} in / {usage.output_tokens} out, "
        f"{size(usage.dynamodb_bytes)} in DynamoDB, {size(usage.s3_bytes)} in S3"
    )
    lines += [f"note: {n}" for n in view.notes]
    return lines


def render_cost(usage: Any, estimate: Any, prices_path: str, wait: Any = None) -> list[str]:
    """The text of ``longstep show --cost``: one line per item, the total, the model's wait
    (``wait``: ``longstep_kit.ops.views.cost.ModelWait``) and the storage."""
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
    lines += ["  " + line for line in table(["ITEM", "QUANTITY", "PRICE", "DOLLARS"], rows)]
    lines.append(
        f"  total {dollars(estimate.total)} (infrastructure {dollars(estimate.infrastructure)}, model {dollars(estimate.total - estimate.infrastructure)})"
    )
    if wait is not None:
        lines.append(
            f"  model wait: each second a model call takes adds {dollars(wait.per_second)} ({wait.model_calls} calls, ModelTurn's "
            f"{wait.memory_mb} MB Lambda waiting; a deployed run's durations above include it, a scripted local run's do not)"
        )
        if wait.seconds:
            lines.append(
                f"  at {wait.seconds:g} s per model call: infrastructure {dollars(estimate.infrastructure + wait.dollars)}, "
                f"total {dollars(estimate.total + wait.dollars)}"
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


def view_json(view: Any, estimate: Any, now: float) -> dict[str, Any]:
    """``show --json``: where the run stands, its executions, timeline and usage (and cost, if estimated)."""
    out = {
        "state": state_json(view.state, now),
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
