"""Concurrency keys and the shared model rate limit at fleet size (issue 27): a few hundred runs
across five tenants on the local stack, with a concurrency limit per tenant and a requests-per-
minute quota on the model, on the virtual clock.

Measured from what the runs did: each FleetGate and ModelTurn invocation as it ends (with the
virtual time), each key's slots read whenever no FleetGate invocation is in flight (the slots'
only writers are done), and the fleet states' transitions in the executions' histories. Checked:
no key ever over its limit, none under it while a run of it waited, every run making the same
invocations whether it waited or not (a waiting run invokes nothing), model calls per 60 virtual
seconds never over the quota and none failed. Cost per 1,000 runs priced with ``infra/prices.json``.
Writes ``bench/results/fleet_gates.json`` and its part of the fleet section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.sections import write_section

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "fleet_gates.json"
REPORT = ROOT / "bench" / "RESULTS.md"
PRICES = ROOT / "infra" / "prices.json"
BEGIN, END = "<!-- bench-fleet-gates:begin -->", "<!-- bench-fleet-gates:end -->"
TENANTS = ("acme", "globex", "initech", "umbrella", "hooli")
FLEET_STATES = {"AcquireSlot", "ReleaseSlot", "DrawRate", "RateDrawn", "WaitRate"}


def fleet_settings(limit: int, rpm: int) -> dict[str, Any]:
    from longstep.settings import DEFAULT_MODEL_ID

    rate = {"requests_per_minute": rpm, "tokens_per_minute": 10_000_000, "tokens_per_call": 1_000}
    return {"concurrency": {"key": "tenant", "limit": limit}, "rate_limits": {DEFAULT_MODEL_ID: rate}}


def run_gates(stack: Any, runs: int, limit: int, rpm: int) -> dict[str, Any]:
    from longstep.concurrency import Slots
    from longstep_kit.local.runner import start_input
    from longstep_kit.local.scenario import Scenario
    from longstep_kit.testing.wait import wait_execution
    from tests.fixtures.agents import fleet

    sfn = stack.client("stepfunctions")
    slots = Slots(stack.client("dynamodb"), stack.outputs["CheckpointTableName"], sfn, limit)
    lock, in_flight, ended, quiet = threading.Lock(), [0], [], []

    def before(inv: Any) -> None:
        if inv.task == "fleet_gate":
            with lock:
                in_flight[0] += 1

    def after(inv: Any) -> None:
        run = (inv.event or {}).get("run_id") or ((inv.event or {}).get("item") or {}).get("run_id") or ""
        with lock:
            ended.append((run, inv.task, inv.result if isinstance(inv.result, dict) else {}, inv.error, stack.clock.time()))
            if inv.task == "fleet_gate":
                in_flight[0] -= 1
                if in_flight[0] == 0:
                    quiet.extend(slots.state(t) for t in TENANTS)

    stack.dispatcher.before_invoke.append(before)
    stack.dispatcher.after_invoke.append(after)
    began = time.perf_counter()
    try:
        arns = {}
        for i in range(runs):
            run_id = f"gates-{i:03d}"
            scenario = Scenario.model_validate(fleet.scenario(run_id, "us", False))
            payload = {**start_input(stack, scenario, run_id), "tenant": TENANTS[i % len(TENANTS)]}
            arns[run_id] = sfn.start_execution(stateMachineArn=stack.alias_arn, name=run_id, input=json.dumps(payload))["executionArn"]
        statuses = Counter(wait_execution(sfn, arn, 1800)["status"] for arn in arns.values())
    finally:
        stack.dispatcher.before_invoke.remove(before)
        stack.dispatcher.after_invoke.remove(after)
    wall = time.perf_counter() - began
    transitions = Counter()
    for arn in arns.values():
        for event in sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]:
            name = (event.get("stateEnteredEventDetails") or {}).get("name")
            if name:
                transitions["fleet" if name in FLEET_STATES else "other"] += 1
    calls = sorted(t for _, task, _, _, t in ended if task == "model_turn")
    per_run = {run: sorted(task for r, task, *_ in ended if r == run) for run in arns}
    queued = {run for run, task, result, *_ in ended if task == "fleet_gate" and result.get("status") == "queued"}
    left = [slots.state(t) for t in TENANTS]
    return {
        "runs": runs,
        "tenants": len(TENANTS),
        "limit": limit,
        "requests_per_minute": rpm,
        "statuses": dict(statuses),
        "quiet_moments": len(quiet),
        "max_running": max((s["running"] for s in quiet), default=0),
        "idle_while_waiting": sum(1 for s in quiet if s["waiters"] and s["running"] < limit),
        "runs_that_waited": len(queued),
        "same_invocations_waiting_or_not": len({tuple(tasks) for tasks in per_run.values()}) == 1,
        "invocations_per_run": len(next(iter(per_run.values()))),
        "fleet_invocations_per_run": sum(1 for _, task, *_ in ended if task == "fleet_gate") / runs,
        "model_calls": len(calls),
        "model_calls_failed": sum(1 for _, task, _, error, _ in ended if task == "model_turn" and error),
        "max_calls_in_60s": max((sum(1 for c in calls if s <= c < s + 60) for s in calls), default=0),
        "virtual_minutes": round((calls[-1] - calls[0]) / 60, 2) if calls else 0,
        "fleet_transitions_per_run": transitions["fleet"] / runs,
        "slots_left_held": sum(s["running"] for s in left) + sum(len(s["waiters"]) for s in left),
        "wall_seconds": round(wall, 1),
    }


def dollars(results: dict[str, Any], prices: dict[str, Any]) -> dict[str, float]:
    """The fleet states' cost per 1,000 runs: their transitions, FleetGate's invocations (512 MB,
    as deployed, for about 50 ms each), and its DynamoDB requests (about five write units and
    three read units an invocation: the transactions' items, the reads before them)."""
    sfn = prices["step_functions"]["per_1000_state_transitions"]
    lam = prices["lambda"]
    invocations = results["fleet_invocations_per_run"] * 1000
    lambda_usd = invocations * (lam["per_million_requests"] / 1e6 + 0.5 * 0.05 * lam["per_gb_second"])
    ddb = prices["dynamodb"]
    dynamo_usd = invocations * (5 * ddb["per_million_write_request_units"] + 3 * ddb["per_million_read_request_units"]) / 1e6
    transitions_usd = results["fleet_transitions_per_run"] * sfn
    return {
        "transitions": round(transitions_usd, 4),
        "lambda": round(lambda_usd, 4),
        "dynamodb": round(dynamo_usd, 4),
        "total": round(transitions_usd + lambda_usd + dynamo_usd, 4),
    }


def render(r: dict[str, Any]) -> str:
    c = r["cost"]
    return "\n".join(
        [
            BEGIN,
            "### Concurrency keys and the shared model rate limit",
            "",
            f"{r['runs']} runs of the `fleet` test agent across {r['tenants']} tenants, at most {r['limit']} running per tenant, "
            f"{r['requests_per_minute']} model calls a minute; `python -m bench.fleet.gates` (`make bench-fleet-gates`).",
            "",
            "| checked | measured |",
            "| --- | --- |",
            f"| executions | {r['statuses']} |",
            f"| most running runs of a tenant (at {r['quiet_moments']:,} quiet moments) | {r['max_running']} (limit {r['limit']}) |",
            f"| moments a tenant was under its limit while a run of it waited | {r['idle_while_waiting']} |",
            f"| runs that waited for a slot | {r['runs_that_waited']} |",
            f"| every run made the same {r['invocations_per_run']} invocations, waiting or not | {r['same_invocations_waiting_or_not']} |",
            f"| model calls; most in any 60 virtual seconds; failed | {r['model_calls']}; {r['max_calls_in_60s']} (quota {r['requests_per_minute']}); "
            f"{r['model_calls_failed']} |",
            f"| virtual minutes from the first call to the last | {r['virtual_minutes']} |",
            f"| slots or places left held at the end | {r['slots_left_held']} |",
            "",
            "| the fleet's states, per 1,000 runs | |",
            "| --- | --- |",
            f"| state transitions ({r['fleet_transitions_per_run']:.1f} a run) | ${c['transitions']} |",
            f"| FleetGate invocations ({r['fleet_invocations_per_run']:.1f} a run) | ${c['lambda']} |",
            f"| DynamoDB requests (estimated: 5 write and 3 read units an invocation) | ${c['dynamodb']} |",
            f"| total | ${c['total']} |",
            "",
            f"Wall {r['wall_seconds']} s on this machine.",
            END,
        ]
    )


def main(argv: list[str] | None = None) -> int:
    from longstep_kit.local.stack import LocalStack
    from longstep_kit.project import agent_catalog

    logging.getLogger("moto").setLevel(logging.CRITICAL)
    parser = argparse.ArgumentParser(prog="python -m bench.fleet.gates")
    parser.add_argument("--runs", type=int, default=300, help="runs in the fleet (default 300)")
    parser.add_argument("--limit", type=int, default=4, help="running runs per tenant (default 4)")
    parser.add_argument("--rpm", type=int, default=120, help="model calls a minute (default 120)")
    args = parser.parse_args(argv)
    prices = json.loads(PRICES.read_text())
    agents = {**agent_catalog().references, "fleet": "tests.fixtures.agents.fleet:build"}
    context = {"longstep": {"agents": agents, "fleet": fleet_settings(args.limit, args.rpm)}}
    with LocalStack(context=context) as stack:
        results = run_gates(stack, args.runs, args.limit, args.rpm)
    results["cost"] = dollars(results, prices)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    write_section(REPORT, render(results), BEGIN, END)
    print(render(results))
    ok = results["max_running"] <= args.limit and results["idle_while_waiting"] == 0 and results["same_invocations_waiting_or_not"]
    ok = ok and results["max_calls_in_60s"] <= args.rpm and results["model_calls_failed"] == 0 and results["slots_left_held"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
