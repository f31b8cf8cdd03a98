"""The waits bench's samples summarized for its results file: statistics, the poller's cost, the ratios.

Pure functions of what ``bench/waits/main.py`` measured (no stack, no clock), so the shape of
``bench/results/waits.json`` is decided here.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from bench.waits.params import KINDS, WAIT_SECONDS

# Step Functions' quota on the events of one execution's history (25,000, a hard limit):
# https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html
HISTORY_EVENTS_LIMIT = 25_000


def summarize(values: list[float]) -> dict[str, float]:
    """Median, p95 (nearest rank: the ceil(0.95 n)-th smallest), min, max, mean."""
    ordered = sorted(values)
    n = len(ordered)
    return {
        "n": n,
        "median": statistics.median(ordered),
        "p95": ordered[max(0, math.ceil(0.95 * n) - 1)],
        "min": ordered[0],
        "max": ordered[-1],
        "mean": statistics.fmean(ordered),
    }


def polling_cost(prices: dict[str, Any], counts: dict[str, Any], check_ms: float, memory_mb: int = 128) -> dict[str, float]:
    """List price of a polled wait (us-east-1, ``infra/prices.json``): transitions, Lambda requests
    and compute (the local check duration, billed per ms, at ``memory_mb``), DynamoDB reads
    (one eventually consistent GetItem per poll: half a read unit)."""
    transitions = counts["state_transitions"] * prices["step_functions"]["per_1000_state_transitions"] / 1000
    requests = counts["lambda_invocations"] * prices["lambda"]["per_million_requests"] / 1e6
    billed_ms = max(1, math.ceil(check_ms))
    compute = counts["lambda_invocations"] * billed_ms / 1000 * memory_mb / 1024 * prices["lambda"]["per_gb_second"]
    reads = counts["lambda_invocations"] * 0.5 * prices["dynamodb"]["per_million_read_request_units"] / 1e6
    return {
        "step_functions": transitions,
        "lambda_requests": requests,
        "lambda_compute": compute,
        "dynamodb_reads": reads,
        "total": transitions + requests + compute + reads,
        "lambda_billed_ms_per_check": billed_ms,
        "lambda_memory_mb": memory_mb,
    }


def longstep_summary(rows: list[dict[str, Any]], warmup: dict[str, Any]) -> dict[str, Any]:
    """The measured Longstep runs of one kind (``bench.waits.run.measure_wait`` results), summarized."""
    return {
        "runs": len(rows),
        "all_succeeded": all(r["status"] == "SUCCEEDED" for r in rows),
        "next_handlers": sorted({r["reaction"]["next_handler"] or "none" for r in rows}),
        "wait": {
            "virtual_seconds_target": WAIT_SECONDS,
            "wall_seconds": summarize([r["wait"]["wall_seconds"] for r in rows]),
            "virtual_seconds": summarize([r["wait"]["virtual_seconds_on_local_clock"] for r in rows]),
            "history_wall_seconds": summarize([r["wait"]["history_wall_seconds"] for r in rows]),
            "lambda_invocations": sorted({r["wait"]["lambda_invocations"] for r in rows}),
            "state_transitions": sorted({r["wait"]["state_transitions"] for r in rows}),
            "history_events": sorted({r["wait"]["history_events"] for r in rows}),
            "lambda_invocations_total": sum(r["wait"]["lambda_invocations"] for r in rows),
            "state_transitions_total": sum(r["wait"]["state_transitions"] for r in rows),
        },
        "reaction_seconds": {
            "from_call": summarize([r["reaction"]["from_call_seconds"] for r in rows]),
            "from_send_task_success": summarize([r["reaction"]["from_send_task_success_seconds"] for r in rows]),
            "call": summarize([r["reaction"]["call_seconds"] for r in rows]),
            "before_send": summarize([r["reaction"]["before_send_task_success_seconds"] for r in rows]),
        },
        "run": {
            "lambda_invocations": sorted({r["run"]["lambda_invocations"] for r in rows}),
            "state_transitions": sorted({r["run"]["state_transitions"] for r in rows}),
            "history_events": sorted({r["run"]["history_events"] for r in rows}),
            "wall_seconds": summarize([r["run"]["wall_seconds"] for r in rows]),
        },
        "samples": rows,
        "warmup": warmup,
    }


def polling_summary(
    counted: dict[str, Any], reacted: dict[str, Any], three_days: dict[str, Any], prices: dict[str, Any], interval_seconds: int
) -> dict[str, Any]:
    """The poller: its per-poll counts, their 3-day extrapolation, its reaction times and its cost.

    Adds the statistics of ``reacted``'s timings to it, under ``summary``.
    """
    per_poll = counted["per_poll"]
    reaction_poll = summarize(reacted["samples_seconds"])
    reacted["summary"] = {
        "wait_for_check": summarize(reacted["wait_for_check_seconds"]),
        "check_to_next_step": summarize(reacted["check_to_next_step_seconds"]),
        "poll_period": summarize(reacted["poll_period_seconds"]),
        # What the stratified plan gives without any latency: the midpoints of the slices.
        "planned": summarize(reacted["planned_wait_seconds"]),
    }
    return {
        "design": "Check (Lambda: GetItem on the decision record) -> Decided (Choice) -> WaitInterval (Wait 5 s) -> Check ...; NextStep (Lambda) once decided",
        "interval_seconds": interval_seconds,
        "counted": counted,
        "three_days": three_days,
        "history_limit": {
            "events_per_execution": HISTORY_EVENTS_LIMIT,
            "polls_per_execution": int(HISTORY_EVENTS_LIMIT // per_poll["history_events"]) if per_poll["history_events"] else None,
            "executions_needed": math.ceil(three_days["history_events"] / HISTORY_EVENTS_LIMIT),
        },
        "reaction": {**reacted, "seconds": reaction_poll},
        "cost_3_days_usd": polling_cost(prices, three_days, counted["check_ms_local"]),
    }


def ratios(longstep: dict[str, Any], polling: dict[str, Any]) -> dict[str, Any]:
    """The poller over Longstep: reaction times, and what the poller's wait costs over a whole Longstep run."""
    reaction_poll, three_days = polling["reaction"]["seconds"], polling["three_days"]
    med = {k: longstep[k]["reaction_seconds"]["from_call"]["median"] for k in KINDS}
    p95 = {k: longstep[k]["reaction_seconds"]["from_call"]["p95"] for k in KINDS}
    return {
        "polling_over_longstep_reaction_median": {k: reaction_poll["median"] / med[k] for k in KINDS},
        "polling_over_longstep_reaction_p95": {k: reaction_poll["p95"] / p95[k] for k in KINDS},
        "polling_wait_transitions_over_longstep_run_transitions": {
            k: three_days["state_transitions"] / max(longstep[k]["run"]["state_transitions"]) for k in KINDS
        },
        "polling_wait_invocations_over_longstep_run_invocations": {
            k: three_days["lambda_invocations"] / max(longstep[k]["run"]["lambda_invocations"]) for k in KINDS
        },
    }
