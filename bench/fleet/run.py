"""A fleet on the local stack (issue 27): a few hundred runs across five tenants, a deploy that
breaks one region's lookup, the runs index's cost, the queries that select the broken runs, a
bulk redrive after the fix that skips the runs diverging on replay, and budgeted runs that ask,
are allowed once and stop at the new limit (``bench/fleet/budgets.py``).

Measured: every DynamoDB write of a runs-index record (``index``, ``index#...``) is counted in
moto with its size: write units are DynamoDB's (one per KB, at least one), and the index's own
writes are counted as DynamoDB bills a global secondary index (one write per item put into it,
two when an update moves an item to another partition: a delete and a put). The queries' reads
are counted the same way (a Query of the index is eventually consistent: half a read unit per
4 KB; each GetItem of an index record, strongly consistent: one). Storage is the index records'
bytes plus DynamoDB's 100 bytes of overhead an item, in the table and again in the index. All
priced with ``infra/prices.json``, per 1,000 runs.

Checked, as the issue's "Done when" asks: the queries select exactly the broken runs, the redrive
skips exactly the runs that diverge and brings every other to SUCCEEDED. Writes
``bench/results/fleet.json`` and the fleet section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.fleet.budgets import render_budgets, run_budgets
from bench.sections import write_section

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "fleet.json"
REPORT = ROOT / "bench" / "RESULTS.md"
PRICES = ROOT / "infra" / "prices.json"
BEGIN, END = "<!-- bench-fleet:begin -->", "<!-- bench-fleet:end -->"
TENANTS = ("acme", "globex", "initech", "umbrella", "hooli")
ITEM_OVERHEAD_BYTES = 100  # https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html


def _region(i: int) -> str:
    return "eu" if i % 4 == 0 else "us"


def _legacy(i: int) -> bool:
    return TENANTS[i % len(TENANTS)] == "globex" and _region(i) == "eu"


def _count_index_requests(counts: Counter) -> list[tuple[Any, str, Any]]:
    """Count the runs index's requests in moto's DynamoDB backend (wrapped, then put back)."""
    from moto.dynamodb.models import DynamoDBBackend

    names = ("put_item", "update_item", "query", "get_item")
    originals = [(DynamoDBBackend, name, getattr(DynamoDBBackend, name)) for name in names]
    put, update, query, get = (o[2] for o in originals)

    def is_index(key: dict[str, Any]) -> bool:
        return str((key.get("sk") or {}).get("S", "")).startswith("index")

    def put_item(backend, table_name, item_attrs, *args, **kwargs):
        if is_index(item_attrs):
            units = max(1, math.ceil(len(json.dumps(item_attrs)) / 1024))
            counts["writes"] += 1
            counts["write_units"] += units
            counts["gsi_write_units"] += units
        return put(backend, table_name, item_attrs, *args, **kwargs)

    def update_item(backend, table_name, key, *args, **kwargs):
        item = update(backend, table_name, key, *args, **kwargs)
        if is_index(key):
            units = max(1, math.ceil(len(json.dumps(item.to_json())) / 1024))
            counts["writes"] += 1
            counts["write_units"] += units
            counts["gsi_write_units"] += 2 * units  # the status moved: out of one partition, into another
        return item

    def query_(backend, table_name, *args, **kwargs):
        result = query(backend, table_name, *args, **kwargs)
        if kwargs.get("index_name") == "runs_by_facet":
            counts["queries"] += 1
            counts["read_units"] += 0.5 * max(1, math.ceil(sum(len(json.dumps(i.to_json())) for i in result[0]) / 4096))
        return result

    def get_item(backend, table_name, key=None, *args, **kwargs):
        if is_index(key or {}):
            counts["gets"] += 1
            counts["read_units"] += 1
        return get(backend, table_name, key, *args, **kwargs)

    DynamoDBBackend.put_item, DynamoDBBackend.update_item, DynamoDBBackend.query, DynamoDBBackend.get_item = put_item, update_item, query_, get_item
    return originals


def _scenario(i: int) -> Any:
    from longstep_kit.local.scenario import Scenario
    from tests.fixtures.agents import fleet

    return Scenario.model_validate(fleet.scenario(f"bench-fleet-{i}", _region(i), _legacy(i)))


def run_fleet(stack: Any, runs: int) -> dict[str, Any]:
    """The fleet, its queries and its redrive; what each cost and whether each was exact."""
    from longstep import keys
    from longstep.artifacts import ArtifactStore
    from longstep.humans import escalations
    from longstep.store import CheckpointStore
    from longstep_kit.local.runner import start_input
    from longstep_kit.ops import runs as run_ops
    from longstep_kit.ops.bulk import BulkRunner, TokenBucket
    from longstep_kit.ops.export import export_run
    from longstep_kit.ops.fleet_query import RunsQuery
    from longstep_kit.ops.replay import replay_export
    from longstep_kit.testing.wait import wait_execution, wait_until
    from tests.fixtures.agents import fleet

    sfn = stack.client("stepfunctions")
    table = stack.outputs["CheckpointTableName"]
    store = CheckpointStore(table, stack.client("dynamodb"))
    ids = [f"bf-{i:04d}" for i in range(runs)]
    broken = {ids[i] for i in range(runs) if _region(i) == "eu"}
    divergent = {ids[i] for i in range(runs) if _legacy(i)}
    counts: Counter = Counter()
    originals = _count_index_requests(counts)
    fleet.DEPLOY["broken"] = True
    started = time.perf_counter()
    try:
        # The humans play their part before time may skip (else the escalations' 7 days pass at once).
        stack.clock.hold()
        arns = {}
        for i, run_id in enumerate(ids):
            payload = {**start_input(stack, _scenario(i), run_id), "tenant": TENANTS[i % len(TENANTS)], "tags": [f"region-{_region(i)}"]}
            arns[run_id] = sfn.start_execution(stateMachineArn=stack.alias_arn, name=run_id, input=json.dumps(payload))["executionArn"]

        def parked() -> list:
            found = [(r, rec) for r in sorted(broken) for rec in store.query_prefix(r, keys.ESCALATION_PREFIX)]
            return found if len(found) == len(broken) else []

        for run_id, record in wait_until("the broken runs to escalate", parked, timeout=1800, max_poll=2.0):
            key = keys.parse(record["sk"])
            escalations.resolve(store, sfn, run_id, key.turn, key.call, escalations.Resolution(action="abort", resolver="bench"))
        stack.clock.release()
        ended = {r: wait_execution(sfn, arn, timeout=1800)["status"] for r, arn in arns.items()}
        fleet_seconds = time.perf_counter() - started
        writes = dict(counts)
        counts.clear()
        query = RunsQuery(stack.client("dynamodb"), table, sfn, stack.state_machine_arn)
        queries = {}
        for where, expected in (
            ("status=failed", broken),
            ("status=failed AND tenant=globex", {r for r in broken if TENANTS[ids.index(r) % len(TENANTS)] == "globex"}),
            ("error=ToolFailedError AND tag=region-eu", broken),
        ):
            counts.clear()
            found = {r["run_id"] for r in query.select(where)}
            queries[where] = {
                "selected": len(found),
                "exact": found == expected,
                "read_units": counts["read_units"],
                "index_queries": counts["queries"],
            }
        fleet.DEPLOY["broken"] = False
        artifacts = ArtifactStore(stack.outputs["ArtifactBucketName"], stack.client("s3"))

        def gate(run_id: str) -> list[str]:
            return replay_export(export_run(store, artifacts, run_id), lambda name: fleet.fixed(), unfinished=True).divergences

        runner = BulkRunner(store, sfn, stack.state_machine_arn, query, who="bench", bucket=TokenBucket(rate=20, burst=20), replay_gate=gate)
        redrive_started = time.perf_counter()
        op_id = runner.run("redrive", "status=failed", {})
        outcomes = {r["run_id"]: r["outcome"] for r in runner.audit.runs(op_id)}
        succeeded = sum(
            wait_execution(sfn, run_ops.latest_execution(sfn, stack.state_machine_arn, r)["executionArn"], timeout=1800)["status"] == "SUCCEEDED"
            for r, o in outcomes.items()
            if o == "resumed"
        )
        redrive_seconds = time.perf_counter() - redrive_started
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)
        fleet.DEPLOY["broken"] = False
    index_bytes = 0
    index_items = 0
    for page in stack.client("dynamodb").get_paginator("scan").paginate(TableName=table):
        for item in page["Items"]:
            if item["sk"]["S"].startswith("index") and item["pk"]["S"] in ended:
                index_items += 1
                index_bytes += len(json.dumps(item)) + ITEM_OVERHEAD_BYTES
    return {
        "runs": runs,
        "tenants": len(TENANTS),
        "failed_by_the_deploy": sum(1 for s in ended.values() if s == "FAILED"),
        "failed_exactly_the_broken_runs": {r for r, s in ended.items() if s == "FAILED"} == broken,
        "fleet_wall_seconds": round(fleet_seconds, 1),
        "index": {**writes, "items": index_items, "bytes": index_bytes},
        "queries": queries,
        "redrive": {
            "selected": len(outcomes),
            "diverged": sum(1 for o in outcomes.values() if o == "diverged"),
            "diverged_exactly_the_legacy_runs": {r for r, o in outcomes.items() if o == "diverged"} == divergent,
            "resumed": sum(1 for o in outcomes.values() if o == "resumed"),
            "resumed_succeeded": succeeded,
            "rate_per_second": runner.bucket.rate,
            "rate_waited_seconds": round(runner.bucket.waited, 2),
            "wall_seconds": round(redrive_seconds, 1),
        },
    }


def dollars(results: dict[str, Any], prices: dict[str, Any]) -> dict[str, float]:
    """The runs index's cost per 1,000 runs: its writes (table and index) and a month of its storage."""
    ddb = prices["dynamodb"]
    index = results["index"]
    per_run = 1000 / results["runs"]
    writes = (index["write_units"] + index["gsi_write_units"]) * per_run * ddb["per_million_write_request_units"] / 1e6
    storage = 2 * index["bytes"] * per_run / 1024**3 * ddb["per_gb_month"]  # the table's copy and the index's
    return {
        "writes_per_1000_runs": round(writes, 6),
        "storage_per_1000_runs_month": round(storage, 6),
        "total_per_1000_runs": round(writes + storage, 6),
    }


def render(results: dict[str, Any]) -> str:
    index, cost, redrive = results["index"], results["cost"], results["redrive"]
    runs = results["runs"]
    lines = [
        BEGIN,
        "## Fleets (issue 27): the runs index, queries and a bulk redrive",
        "",
        f"{runs} runs of the `fleet` test agent across {results['tenants']} tenants on the local stack; a deploy broke the lookup of "
        f"one region and {results['failed_by_the_deploy']} runs failed (exactly those: {results['failed_exactly_the_broken_runs']}). "
        "`python -m bench.fleet` (`make bench-fleet`).",
        "",
        "| the runs index | per run | per 1,000 runs |",
        "| --- | --- | --- |",
        f"| writes of index records (PutItem/UpdateItem) | {index['writes'] / runs:.2f} | {index['writes'] * 1000 / runs:,.0f} |",
        f"| write units, table + index | {(index['write_units'] + index['gsi_write_units']) / runs:.2f} | "
        f"{(index['write_units'] + index['gsi_write_units']) * 1000 / runs:,.0f} |",
        f"| stored bytes (table; the index holds a copy) | {index['bytes'] / runs:,.0f} | {index['bytes'] * 1000 / runs / 1024:,.0f} KB |",
        f"| dollars: writes | | ${cost['writes_per_1000_runs']:.4f} |",
        f"| dollars: storage, a month | | ${cost['storage_per_1000_runs_month']:.6f} |",
        "",
        "| query | runs selected | exact | index Queries | read units |",
        "| --- | --- | --- | --- | --- |",
        *[f"| `{w}` | {q['selected']} | {q['exact']} | {q['index_queries']} | {q['read_units']:g} |" for w, q in results["queries"].items()],
        "",
        f"Bulk redrive of `status=failed` at {redrive['rate_per_second']:g} runs/s: {redrive['selected']} selected, "
        f"{redrive['diverged']} left alone because their replay on the fixed code diverges (exactly the runs that called the removed "
        f"tool: {redrive['diverged_exactly_the_legacy_runs']}), {redrive['resumed']} resumed and {redrive['resumed_succeeded']} of them "
        f"SUCCEEDED; the token bucket held the operation back {redrive['rate_waited_seconds']} s "
        f"(wall {redrive['wall_seconds']} s, the fleet itself {results['fleet_wall_seconds']} s on this machine).",
        *(render_budgets(results["budgets"]) if "budgets" in results else []),
        END,
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    from longstep_kit.local.stack import LocalStack
    from longstep_kit.project import agent_catalog

    logging.getLogger("moto").setLevel(logging.CRITICAL)  # the engine logs each failed run's state machine
    parser = argparse.ArgumentParser(prog="python -m bench.fleet")
    parser.add_argument("--runs", type=int, default=300, help="runs in the fleet (default 300)")
    parser.add_argument("--budget-runs", type=int, default=10, help="budgeted runs after the redrive (default 10; 0: none)")
    args = parser.parse_args(argv)
    prices = json.loads(PRICES.read_text())
    context = {"longstep": {"agents": {**agent_catalog().references, "fleet": "tests.fixtures.agents.fleet:build"}}}
    with LocalStack(context=context) as stack:
        results = run_fleet(stack, args.runs)
        if args.budget_runs:
            results["budgets"] = run_budgets(stack, args.budget_runs)
    results["cost"] = dollars(results, prices)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    write_section(REPORT, render(results), BEGIN, END)
    print(render(results))
    ok = results["failed_exactly_the_broken_runs"] and all(q["exact"] for q in results["queries"].values())
    ok = ok and results["redrive"]["diverged_exactly_the_legacy_runs"] and results["redrive"]["resumed_succeeded"] == results["redrive"]["resumed"]
    if "budgets" in results:
        b = results["budgets"]
        ok = ok and b["allowed_once"] == b["second_allow_refused"] == b["stopped_for_budget"] == b["stopped_at_or_past_the_new_limit"] == b["runs"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
