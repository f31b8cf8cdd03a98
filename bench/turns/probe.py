"""One measured run of a scenario on the local stack, in a process of its own: what the runtime's
requests, the state machine and the run's storage cost per turn (``bench.turns.run`` starts it
once per version of Longstep, side by side).

Run as a script (``python bench/turns/probe.py SCENARIO OUT [CONTEXT_JSON]``) with the version to measure first on
``sys.path`` and its project as the working directory. Counted: every request the runtime's own
boto3 clients (``longstep.clients``, what the handlers use) make, by service and operation; the
driver's and the run report's requests are not the runtime's and are left out. CPU: the process's
(every thread: the engine's and the handlers') over the run phase.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any


def count_runtime_requests(checkpoint_table: str, lock_table: str) -> Counter:
    """Count from now on each request the runtime's cached clients make, as
    ``service:Operation`` and, for DynamoDB, as ``part:Operation`` too, by what it is for: ``steps``
    (the checkpoint table's step, run and context records, and the idempotency table's step locks
    of the versions that lock there), ``stream`` (the run's event stream: its
    ``event#`` records) and ``tools`` (any other table: the agent's own, approvals, memory)."""
    import botocore.client

    from longstep import clients

    counts: Counter = Counter()
    counts_by_invocation: dict[int, Counter] = {}
    current = threading.local()
    lock = threading.Lock()
    original = botocore.client.BaseClient._make_api_call

    def counting(self: Any, operation_name: str, api_params: Any) -> Any:
        service = self.meta.service_model.service_name
        if clients._clients.get(service) is self:
            part = None
            if service == "dynamodb":
                tables = [api_params.get("TableName"), *(api_params.get("RequestItems") or ())]
                if lock_table in tables:
                    part = "steps"
                elif checkpoint_table not in tables:
                    part = "tools"
                else:
                    part = "stream" if '"event#' in json.dumps(api_params, default=str) else "steps"
            with lock:
                counts[f"{service}:{operation_name}"] += 1
                if part:
                    counts[f"{part}:{operation_name}"] += 1
                    invocation = getattr(current, "invocation", None)
                    if invocation is not None:
                        counts_by_invocation.setdefault(id(invocation), Counter())[part] += 1
        return original(self, operation_name, api_params)

    botocore.client.BaseClient._make_api_call = counting
    counts.by_invocation = counts_by_invocation  # type: ignore[attr-defined]
    counts.current = current  # type: ignore[attr-defined]
    return counts


def per_turn_requests(invocations: list[Any], by_invocation: dict[int, Counter]) -> dict[str, Any]:
    """The runtime's requests (``steps``) of each turn: its ModelTurn and CallTool invocations; the
    others (Init, ContinueAsNew, Finish) are the run's, not a turn's."""
    turns: dict[int, Counter] = {}
    calls: dict[int, int] = {}
    run_level: Counter = Counter()
    for inv in invocations:
        steps = by_invocation.get(id(inv), Counter())["steps"]
        task = inv.handler.split(".")[-2]
        turn = inv.event.get("next_turn") if task == "model_turn" else inv.event.get("turn") if task == "call_tool" else None
        if isinstance(turn, int):
            turns.setdefault(turn, Counter())[task] += steps
            # The turn's calls, as its ModelTurn routed them (CallTool's, or run inside ModelTurn).
            if task == "model_turn" and inv.error is None and isinstance(inv.result, dict):
                calls[turn] = len(inv.result.get("calls") or [])
        else:
            run_level[task] += steps
    one_call = sorted(sum(c.values()) for t, c in turns.items() if calls.get(t) == 1)
    return {
        "turns_with_one_call": len(one_call),
        "one_call_turn_median": one_call[len(one_call) // 2] if one_call else None,
        "one_call_turn_max": one_call[-1] if one_call else None,
        "by_task_of_a_one_call_turn": dict(next((c for t, c in sorted(turns.items()) if calls.get(t) == 1 and t > 0), Counter())),
        "run_level": dict(run_level),
    }


def main(argv: list[str]) -> int:
    scenario_path, out_path = Path(argv[0]), Path(argv[1])
    # The CDK context overrides of the stack (the inline-reads agent: ``bench.turns.run``).
    context = json.loads(argv[2]) if len(argv) > 2 else None
    from longstep_kit.local.runner import RunOptions, run_scenario
    from longstep_kit.local.scenario import Scenario
    from longstep_kit.local.stack import LocalStack

    scenario = Scenario.model_validate(json.loads(scenario_path.read_text()))
    with LocalStack(context=context) as stack:
        # A warm-up run (imports, first clients, the template's first execution), not measured.
        stack.reset_data()
        warm = run_scenario(
            stack, Scenario.model_validate({**json.loads(scenario_path.read_text()), "name": "warmup"}), RunOptions(run_id="turns-warmup")
        )
        if warm["status"] != "SUCCEEDED":
            raise RuntimeError(f"warm-up: {warm['status']}: {warm.get('cause')}")
        stack.reset_data()
        counts = count_runtime_requests(stack.outputs["CheckpointTableName"], stack.outputs["IdempotencyTableName"])
        first = len(stack.dispatcher.invocations)
        stack.dispatcher.before_invoke.append(lambda invocation: setattr(counts.current, "invocation", invocation))
        cpu, wall = time.process_time(), time.perf_counter()
        report = run_scenario(stack, scenario, RunOptions(run_id="turns-measured", timeout_seconds=1800))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        if report["status"] != "SUCCEEDED":
            raise RuntimeError(f"{scenario.name}: {report['status']}: {report.get('error')}: {report.get('cause')}")
        out = {
            "turns": report["turns"] if "turns" in report else None,
            "requests": dict(sorted(counts.items())),
            "turn_requests": per_turn_requests(stack.dispatcher.invocations[first:], counts.by_invocation),
            "cpu_seconds": cpu,
            "wall_seconds": wall,
            "lambda_invocations": report["lambda_invocations"],
            "state_transitions": report["state_transitions"],
            "executions": report.get("executions"),
            "storage": report["storage"],
            "transcript_sha256": report.get("transcript_sha256"),
        }
    out_path.write_text(json.dumps(out, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
