"""The fleet bench's budgets (issue 27): runs with a token budget ask a human near their limit,
are allowed once through the approvals inbox, and then stop cleanly at the new limit; each count
is read back from the runs' own records (their recorded model steps and asks), not from the
bench's bookkeeping."""

from __future__ import annotations

import json
from typing import Any

TOKENS, ASK_AT = 400, 0.5  # each run's budget: it asks past 200 tokens; each turn spends 150
TENANTS = ("acme", "globex", "initech", "umbrella", "hooli")


def budget_scenario(name: str) -> Any:
    """Ten turns of 150 tokens; turn 2 waits for the event ``go`` (the human answers the ask then)."""
    from longstep_kit.local.scenario import Scenario

    turns: dict[str, Any] = {str(t): {"text": f"Turn {t}.", "tool_calls": [{"name": "lookup", "input": {"region": "us"}}]} for t in range(10)}
    turns["2"] = {"text": "Waiting for the go.", "tool_calls": [{"name": "wait_for", "input": {"event": "go", "timeout_seconds": 600}}]}
    turns["10"] = {"text": "All checked."}
    return Scenario.model_validate({"name": name, "input": {"goal": "Check every region.", "agent": "fleet", "max_turns": 20}, "turns": turns})


def run_budgets(stack: Any, count: int) -> dict[str, Any]:
    """``count`` budgeted runs: each asks, is allowed once, and is stopped at its new limit."""
    from longstep import budget, keys
    from longstep.humans import budget_asks, signals
    from longstep.humans.table import ApprovalTable, Decision
    from longstep.store import CheckpointStore
    from longstep_kit.local.runner import start_input
    from longstep_kit.testing.wait import wait_execution, wait_until
    from tests.fixtures.agents import fleet

    sfn = stack.client("stepfunctions")
    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
    table = ApprovalTable(stack.outputs["ApprovalsTableName"], stack.client("dynamodb"))
    ids = [f"bb-{i:03d}" for i in range(count)]
    arns: dict[str, str] = {}
    second_allow_refused = 0
    with stack.clock.held():  # the humans answer before time may skip (the waits' timeouts)
        for i, run_id in enumerate(ids):
            payload = {**start_input(stack, budget_scenario(run_id), run_id), "tenant": TENANTS[i % len(TENANTS)]}
            payload["budget"] = {"tokens": TOKENS, "ask_at": ASK_AT}
            arns[run_id] = sfn.start_execution(stateMachineArn=stack.alias_arn, name=run_id, input=json.dumps(payload))["executionArn"]
        allow = Decision(decision="approve", approver="bench")
        for run_id in ids:
            wait_until(f"{run_id} to ask", lambda r=run_id: budget.pending_asks(store, r), timeout=600, max_poll=1.0)
            budget.answer(
                store, run_id, allow=True, who="bench", decide=lambda record: budget_asks.decide(table, store, str(record["approval_id"]), allow)
            )
            try:
                budget.answer(
                    store, run_id, allow=True, who="bench", decide=lambda record: budget_asks.decide(table, store, str(record["approval_id"]), allow)
                )
            except LookupError:  # answered once: nothing is pending now
                second_allow_refused += 1
        for run_id in ids:
            waiting = lambda r=run_id: any(s.get("status") == "waiting" for s in store.query_prefix(r, keys.SIGNAL_PREFIX))  # noqa: E731
            wait_until(f"{run_id}'s wait", waiting, timeout=600, max_poll=1.0)
            signals.send(store, sfn, run_id, "go", {}, lambda name: fleet.build())
    rows = []
    for run_id in ids:
        output = json.loads(wait_execution(sfn, arns[run_id], timeout=1800)["output"])
        steps = store.steps(run_id)
        asks = budget.pending_asks(store, run_id)
        rows.append(
            {
                "status": output.get("status"),
                "stop_reason": output.get("stop_reason"),
                "spent_tokens": budget.spend(steps, None)["tokens"],
                "model_turns": sum(1 for s in steps if s.kind == "model"),
                "asks": [a["status"] for a in asks],
                "new_limit": asks[0].get("limit", 0) + asks[0].get("more", 0) if asks else None,
                "inbox_pending": len([r for r in table.by_status("pending", run_id)]),
            }
        )
    allowed_once = sum(r["asks"][:1] == ["allowed"] and "allowed" not in r["asks"][1:] for r in rows)
    stopped = sum(r["status"] == "STOPPED" and r["stop_reason"] == "budget" for r in rows)
    over_new_limit = sum(r["new_limit"] is not None and r["spent_tokens"] >= r["new_limit"] for r in rows)
    return {
        "runs": count,
        "budget_tokens": TOKENS,
        "ask_at": ASK_AT,
        "allowed_once": allowed_once,
        "second_allow_refused": second_allow_refused,
        "stopped_for_budget": stopped,
        "stopped_at_or_past_the_new_limit": over_new_limit,
        "spent_tokens": sorted({r["spent_tokens"] for r in rows}),
        "model_turns": sorted({r["model_turns"] for r in rows}),
        "new_limits": sorted({r["new_limit"] for r in rows if r["new_limit"] is not None}),
        "asks_left_in_the_inbox": sum(r["inbox_pending"] for r in rows),
    }


def render_budgets(b: dict[str, Any]) -> list[str]:
    """The budgets' lines of the fleet section."""
    return [
        "",
        f"Budgets: {b['runs']} runs of {b['budget_tokens']} tokens each, asking at {b['ask_at']:.0%}: {b['allowed_once']} asked and "
        f"were allowed once through the approvals inbox (a second allow found nothing pending for {b['second_allow_refused']}); "
        f"{b['stopped_for_budget']} then stopped cleanly (status `stopped`, reason `budget`), {b['stopped_at_or_past_the_new_limit']} "
        f"of them at or past the new limit (new limits {b['new_limits']} tokens; spent {b['spent_tokens']} in {b['model_turns']} model "
        f"turns, counted from each run's recorded steps); asks left pending in the inbox after the runs ended: {b['asks_left_in_the_inbox']}.",
    ]
