"""What live runs cost (issue 23), measured on the local stack.

- The event stream: the triage scenario and the 60-turn synthetic session of ``bench.cost`` run
  with the stream on, and every DynamoDB request the stream makes is counted in moto (its
  PutItems of ``event#`` items and the Queries that read the log's end) with its size, so the
  request units are DynamoDB's (a write unit per KB written, a read unit per 4 KB read strongly
  consistent, at least one) and priced with ``infra/prices.json``, per 1,000 agent turns.
- A follower: ``longstep watch`` reads the log every 0.5 s, at least one read unit a poll.
- A 3-day pause: the triage run is paused after turn 4 and held for three days of the virtual
  clock; the Lambda invocations and history events of the execution during the pause are counted.

Writes ``bench/results/live.json`` and the live section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from bench.sections import write_section

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "live.json"
REPORT = ROOT / "bench" / "RESULTS.md"
PRICES = ROOT / "infra" / "prices.json"
BEGIN, END = "<!-- bench-live:begin -->", "<!-- bench-live:end -->"
THREE_DAYS = 3 * 86_400
POLL_SECONDS = 0.5


def _count_stream_requests(counts: Counter) -> list[tuple[Any, str, Any]]:
    """Count the event stream's requests in moto's DynamoDB backend (wrapped, then put back)."""
    from moto.dynamodb.models import DynamoDBBackend

    originals = [(DynamoDBBackend, name, getattr(DynamoDBBackend, name)) for name in ("put_item", "query")]
    put, query = originals[0][2], originals[1][2]

    def put_item(backend, table_name, item_attrs, *args, **kwargs):
        sk = str((item_attrs.get("sk") or {}).get("S", ""))
        if sk.startswith("event#"):
            counts["puts"] += 1
            counts["write_units"] += math.ceil(len(json.dumps(item_attrs)) / 1024)
        return put(backend, table_name, item_attrs, *args, **kwargs)

    def query_(backend, table_name, hash_key, range_comparison, range_objs, *args, **kwargs):
        result = query(backend, table_name, hash_key, range_comparison, range_objs, *args, **kwargs)
        if range_objs and any(str((o or {}).get("S", "")).startswith("event#") for o in range_objs):
            items = result[0]
            counts["queries"] += 1
            counts["read_units"] += max(1, math.ceil(sum(len(json.dumps(i.to_json())) for i in items) / 4096))
        return result

    DynamoDBBackend.put_item, DynamoDBBackend.query = put_item, query_
    return originals


def _stream(stack, scenario, run_id: str, prices: dict[str, Any]) -> dict[str, Any]:
    from longstep_kit.testing import RunOptions, run_scenario

    counts: Counter = Counter()
    originals = _count_stream_requests(counts)
    try:
        report = run_scenario(stack, scenario, RunOptions(run_id=run_id))
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)
    turns = report["turns"]
    ddb = prices["dynamodb"]
    dollars = (
        counts["write_units"] * ddb["per_million_write_request_units"] / 1e6 + counts["read_units"] * ddb["per_million_read_request_units"] / 1e6
    )
    return {
        "scenario": scenario.name,
        "turns": turns,
        "lambda_invocations": report["lambda_invocations"],
        "event_items_put": counts["puts"],
        "queries": counts["queries"],
        "write_units": counts["write_units"],
        "read_units": counts["read_units"],
        "requests_per_turn": round((counts["puts"] + counts["queries"]) / turns, 2),
        "dollars_per_1000_turns": round(dollars / turns * 1000, 5),
    }


def _pause(stack, scenario) -> dict[str, Any]:
    from longstep import keys, steering
    from longstep.store import CheckpointStore
    from longstep_kit.ops import runs
    import threading

    from longstep_kit.testing import RunOptions, run_scenario, wait_until

    run_id = "bench-pause"
    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))

    def hook(inv) -> None:
        if inv.task == "model_turn" and inv.error is None and inv.event.get("run_id") == run_id and inv.result.get("turn") == 4:
            steering.pause(store, run_id)

    stack.dispatcher.after_invoke.append(hook)
    try:
        done: dict[str, Any] = {}
        runner = threading.Thread(target=lambda: done.update(report=run_scenario(stack, scenario, RunOptions(run_id=run_id))), daemon=True)
        runner.start()
        wait_until("the run parked", lambda: any(i.task == "pause" and i.event.get("run_id") == run_id for i in stack.dispatcher.invocations), 120)
        sfn = stack.client("stepfunctions")
        arn = runs.latest_execution(sfn, stack.state_machine_arn, run_id)["executionArn"]

        def history() -> int:
            return len(sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"])

        before = (len(stack.dispatcher.invocations), history())
        stack.clock.advance(THREE_DAYS)
        during = (len(stack.dispatcher.invocations) - before[0], history() - before[1])
        steering.unpause(store, sfn, run_id)
        runner.join(120)
        report = done["report"]
    finally:
        stack.dispatcher.after_invoke.remove(hook)
    assert store.get(run_id, keys.FINAL_RECORD) is not None
    return {
        "pause_seconds": THREE_DAYS,
        "lambda_invocations_while_paused": during[0],
        "history_events_while_paused": during[1],
        "state_transitions_while_paused": during[1],
        "status_after_resume": report["status"],
    }


def render(results: dict[str, Any]) -> str:
    lines = [BEGIN, "## Live runs: the event stream and a 3-day pause (issue 23)", ""]
    lines += [
        "Measured on the local stack (`make bench-live`): every request the event stream makes counted in moto's",
        "DynamoDB with its size, priced with `infra/prices.json` (on-demand: a write unit per KB, a read unit per 4 KB",
        "read strongly consistent, at least one). Model tokens aside.",
        "",
        "| scenario | turns | Lambda invocations | event items written | log-end Queries | requests per turn | stream $ per 1,000 turns |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in results["stream"]:
        lines.append(
            f"| {row['scenario']} | {row['turns']} | {row['lambda_invocations']} | {row['event_items_put']} | {row['queries']} "
            f"| {row['requests_per_turn']} | {row['dollars_per_1000_turns']:.5f} |"
        )
    follower = results["follower"]
    pause = results["pause"]
    lines += [
        "",
        f"A follower (`longstep watch`, the run UI) polls every {POLL_SECONDS} s: {follower['polls_per_hour']:,} Queries an hour, "
        f"${follower['dollars_per_hour']:.5f} an hour while it watches.",
        "",
        "| 3-day pause | Lambda invocations | state transitions (history events) | after `resume` |",
        "|---|---:|---:|---|",
        f"| paused after turn 4 for {pause['pause_seconds'] // 86_400} days | {pause['lambda_invocations_while_paused']} "
        f"| {pause['state_transitions_while_paused']} | {pause['status_after_resume']} |",
        END,
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    from bench.cost.run import synthetic
    from longstep_kit.testing import LocalStack, load_scenario

    prices = json.loads(PRICES.read_text())
    triage = load_scenario(ROOT / "events" / "scenarios" / "triage.json")
    with LocalStack() as stack:
        stream = [_stream(stack, triage, "bench-live-triage", prices), _stream(stack, synthetic(60), "bench-live-60", prices)]
        pause = _pause(stack, triage)
    polls = int(3600 / POLL_SECONDS)
    follower = {"polls_per_hour": polls, "dollars_per_hour": round(polls * prices["dynamodb"]["per_million_read_request_units"] / 1e6, 6)}
    results = {"stream": stream, "follower": follower, "pause": pause}
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    write_section(REPORT, render(results), BEGIN, END)
    print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
