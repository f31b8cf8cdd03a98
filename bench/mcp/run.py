"""What a long-running MCP call costs while its task waits (issue 26), measured on the local stack.

``events/scenarios/mcp.json`` runs with the depot's report task living 3 days: the depot suggests
polling hourly (``pollIntervalMs`` 3,600,000) and completes the task on its 72nd ``tasks/get``. The
run waits in the condition loop: CheckCondition polls once, WaitBackoff (a Wait state) waits the
interval, and so on. The counts come from the execution's own history between the first
CheckCondition entered and the CallTool that records the result: Lambda invocations (``TaskScheduled`` of a lambda
resource) that are not a poll, and state transitions (``*StateEntered``, as Standard workflows
bill them: https://aws.amazon.com/step-functions/pricing/). The dispatcher's invocations of the
run in that window cross-check them. Priced with ``infra/prices.json`` (Lambda requests, GB-seconds
at the polls' local durations and the stack's memory, transitions), beside two ways of waiting
without the condition loop: a Lambda that sleeps through the 3 days (chained 15-minute
invocations), and a poller every 5 seconds (the kit that polls a facade).

Writes ``bench/results/mcp.json`` and the MCP section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from bench.sections import write_section

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "events" / "scenarios" / "mcp.json"
RESULTS = ROOT / "bench" / "results" / "mcp.json"
REPORT = ROOT / "bench" / "RESULTS.md"
PRICES = ROOT / "infra" / "prices.json"
BEGIN, END = "<!-- bench-mcp:begin -->", "<!-- bench-mcp:end -->"
POLLS = 72
INTERVAL_MS = 3_600_000
THREE_DAYS = 3 * 86_400
LAMBDA_MAX_SECONDS = 900


def _lambda_scheduled(event: dict[str, Any]) -> bool:
    details = event.get("taskScheduledEventDetails") or {}
    return event["type"] == "TaskScheduled" and details.get("resourceType") == "lambda"


def measure() -> dict[str, Any]:
    """Run the scenario once with a 3-day task and count its wait."""
    from examples.mcp_agent import agent as depot_agent
    from longstep_kit.local.runner import RunOptions, run_scenario
    from longstep_kit.local.stack import LocalStack
    from longstep_kit.ops.views.history import execution_history
    from longstep_kit.testing import load_scenario

    context = {"longstep": {"agents": {"triage": "agents.triage:build", "depot": "examples.mcp_agent.agent:build"}}}
    with LocalStack(context=context) as stack:
        depot = depot_agent.depot().depot
        depot.reset()
        depot.polls_to_complete, depot.poll_interval_ms = POLLS, INTERVAL_MS
        first = len(stack.dispatcher.invocations)
        report = run_scenario(stack, load_scenario(SCENARIO), RunOptions(run_id="bench-mcp", execution_name="bench-mcp"))
        assert report["status"] == "SUCCEEDED", report.get("cause")
        sfn = stack.client("stepfunctions")
        (execution,) = [e for e in sfn.list_executions(stateMachineArn=stack.state_machine_arn)["executions"] if e["name"] == "bench-mcp"]
        events = execution_history(sfn, execution["executionArn"])
        memory_mb = int(stack.dispatcher.invocations[-1].environment.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE") or 512)
        invocations = stack.dispatcher.invocations[first:]
    entered = [(n, e["stateEnteredEventDetails"]["name"]) for n, e in enumerate(events) if e["type"].endswith("StateEntered")]
    checks = [n for n, name in entered if name == "CheckCondition"]
    settled = next(n for n, name in entered if name == "CallTool" and n > checks[-1])
    window = events[checks[0] : settled]  # from the first poll to the CallTool that records the result
    polls = [i for i in invocations if i.task == "check_condition"]
    between = [i.task for i in invocations[invocations.index(polls[0]) : invocations.index(polls[-1]) + 1] if i.task != "check_condition"]
    in_history = sum(1 for e in window if _lambda_scheduled(e))
    # The dispatcher saw the same: nothing of the run but the polls ran in the window.
    assert between == [] and in_history == len(polls), (between, in_history, len(polls))
    waited = sum(int((i.result or {}).get("next_wait") or 0) for i in polls)
    return {
        "task_lifetime_seconds": waited,
        "polls": len(polls),
        "lambda_invocations_between_polls": in_history - len(polls),
        "state_transitions": sum(1 for e in window if e["type"].endswith("StateEntered")),
        "transitions_by_state": {
            name: count
            for name in sorted({n for _, n in entered})
            if (count := sum(1 for at, n in entered if n == name and checks[0] <= at < settled))
        },
        "poll_seconds_median": round(statistics.median(i.seconds for i in polls), 4),
        "memory_mb": memory_mb,
        "depot_effects": {tool: sum(1 for e in depot.ledger if e["tool"] == tool) for tool in ("build_report",)},
    }


def price(doc: dict[str, Any], prices: dict[str, Any]) -> dict[str, Any]:
    """Dollars of the wait, and of the two ways to wait without the condition loop."""
    lam, sfn = prices["lambda"], prices["step_functions"]
    gb = doc["memory_mb"] / 1024
    polls = doc["polls"]
    condition = (
        polls * lam["per_million_requests"] / 1e6
        + polls * doc["poll_seconds_median"] * gb * lam["per_gb_second"]
        + doc["state_transitions"] * sfn["per_1000_state_transitions"] / 1000
    )
    chained = THREE_DAYS // LAMBDA_MAX_SECONDS
    sleeping = THREE_DAYS * gb * lam["per_gb_second"] + chained * lam["per_million_requests"] / 1e6
    every_5s = THREE_DAYS // 5
    polling = (
        every_5s * (lam["per_million_requests"] / 1e6 + doc["poll_seconds_median"] * gb * lam["per_gb_second"])
        + every_5s * 2 * sfn["per_1000_state_transitions"] / 1000
    )
    return {
        "condition_loop": round(condition, 6),
        "sleeping_lambda": round(sleeping, 4),
        "poll_every_5s": round(polling, 4),
        "polls_every_5s": every_5s,
    }


def render(doc: dict[str, Any]) -> str:
    cost = doc["dollars"]
    return "\n".join(
        [
            BEGIN,
            "## A long-running MCP call: its task waits 3 days (issue 26)",
            "",
            "Generated by `bench/mcp/` (do not edit by hand between the markers). Regenerate with `make bench-mcp`.",
            "",
            f"`events/scenarios/mcp.json` on the local stack (enforcement on, virtual clock): the depot's report task lives "
            f"{doc['task_lifetime_seconds'] // 3600} hours (it suggests polling hourly and completes on `tasks/get` number {POLLS}). "
            "Counted from the execution's history from the first CheckCondition to the CallTool that records the result.",
            "",
            "| while the task waits | value |",
            "|---|---|",
            f"| Lambda invocations between two polls | **{doc['lambda_invocations_between_polls']}** |",
            f"| polls (CheckCondition invocations: the call, then `tasks/get`) | {doc['polls']} |",
            f"| state transitions | {doc['state_transitions']} ({', '.join(f'{k} {v}' for k, v in doc['transitions_by_state'].items() if v)}) |",
            f"| a poll's handler time (local, median) | {doc['poll_seconds_median']} s at {doc['memory_mb']} MB |",
            f"| tasks the depot created | {doc['depot_effects']['build_report']} |",
            f"| **cost of the 3-day wait** (Lambda requests and GB-s, transitions) | **${cost['condition_loop']}** |",
            f"| a Lambda sleeping through it (chained 15-minute invocations) | ${cost['sleeping_lambda']} |",
            f"| a poller every 5 s ({cost['polls_every_5s']:,} polls, 2 transitions each) | ${cost['poll_every_5s']} |",
            "",
            "Lambda compute is the handler's own time in-process; in AWS a poll also waits for the MCP server's answer (a",
            "round trip), billed at the same GB-second price. Prices: `infra/prices.json`.",
            END,
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    doc = measure()
    doc["dollars"] = price(doc, json.loads(PRICES.read_text()))
    RESULTS.write_text(json.dumps(doc, indent=2) + "\n")
    write_section(REPORT, render(doc), BEGIN, END)
    print(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
