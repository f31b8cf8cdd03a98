"""What a 3-day wait costs, and how fast the run reacts when it ends: Longstep vs a 5 s poller.

For a run that waits 3 days for an approval (``RequestApproval``, a task token) and a run that
waits 3 days for an event (``wait_for`` -> ``WaitForEvent``, a task token; the signal is delivered
at the end of the 3 days), on the local stack (moto's Step Functions engine running the deployed
definition, the real handlers in-process, the virtual clock held by the bench while the run
parks, then advanced 3 days, ``VirtualClock.advance``):

- Lambda invocations and state transitions (history ``*StateEntered`` events) between the moment
  the wait starts (the task is parked on its token: the history shows ``TaskSubmitted``) and the
  moment the decision or signal arrives;
- the reaction time: from the ``decide``/``deliver`` call (and from its ``SendTaskSuccess``) to
  the next Lambda invocation (CallTool) starting, wall time, over ``--runs`` runs of each kind;

and the same for a polling agent that checks every 5 s (``bench/waits/polling.py``): its
per-poll counts measured on the same engine and extrapolated to 3 days, its reaction time
measured with real 5 s waits.

This module runs the whole bench and is its command line (``python -m bench.waits``); one
Longstep run is measured in ``bench/waits/run.py``, the samples are summarized in
``bench/waits/summary.py`` and rendered in ``bench/waits/render.py``.

Writes ``bench/results/waits.json`` and the waits section of ``bench/RESULTS.md`` (between its own
markers; the rest of the file is left as it is).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from bench.machine import machine_facts
from bench.sections import write_section
from bench.waits.params import KINDS, WAIT_SECONDS
from bench.waits.render import BEGIN, END, render
from bench.waits.run import measure_wait
from bench.waits.summary import longstep_summary, polling_summary, ratios

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the dispatcher imports bench.waits.poll_handlers by module name
    sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "bench" / "results" / "waits.json"
REPORT = ROOT / "bench" / "RESULTS.md"
PRICES = ROOT / "infra" / "prices.json"
POLL_INTERVAL = 5
DEFAULT_RUNS = 20
DEFAULT_COUNT_POLLS = 720  # one virtual hour of 5 s polls, for the per-poll counts
DEFAULT_POLLERS = 20
DEFAULT_COMPOSE_RUNS = 5  # runs of delegate.json and of release.json (issue 14)


def run_bench(runs: int, count_polls: int, pollers: int, emit: Any, compose_runs: int = DEFAULT_COMPOSE_RUNS) -> dict[str, Any]:
    """Measure the Longstep runs, the poller and the composed waits; the results document."""
    from bench.waits.polling import (
        REAL_TIME_TICK_SECONDS,
        InvocationStarts,
        PollingMachine,
        count_polls as measure_polls,
        extrapolate,
        reaction_times,
    )
    from longstep_kit.local.stack import LocalStack

    started = time.perf_counter()
    doc: dict[str, Any] = {"generated_by": "bench/waits (make bench-waits)"}
    load_before = [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None
    with LocalStack() as stack:
        stack_seconds = time.perf_counter() - started
        starts = InvocationStarts(stack.dispatcher).install()
        try:
            clock = stack.clock
            doc["clock"] = {
                "kind": f"{type(clock).__module__}.{type(clock).__name__}",
                "advance_seconds": WAIT_SECONDS,
                "real_time_tick_seconds": REAL_TIME_TICK_SECONDS,
            }
            doc["approval_timeout_hours"] = _approval_timeout_hours(stack)
            longstep: dict[str, list[dict[str, Any]]] = {k: [] for k in KINDS}
            warmup: dict[str, dict[str, Any]] = {}
            for kind in KINDS:  # one run of each first: imports and first-call paths, not counted
                emit(f"warm-up: {kind}")
                warmup[kind] = measure_wait(stack, starts, kind, f"bench-waits-{kind}-warmup")
            for i in range(runs):  # side by side: approval, event, approval, event...
                for kind in KINDS:
                    result = measure_wait(stack, starts, kind, f"bench-waits-{kind}-{i:02d}")
                    if result["status"] != "SUCCEEDED" or result["delivered"] not in ("decided", "delivered"):
                        raise RuntimeError(f"{result['run_id']} ended {result['status']} (signal: {result['delivered']})")
                    if (
                        result["reaction"]["next_handler"] != "longstep_functions.call_tool.lambda_handler"
                        or result["wait"]["ended_by"] != "TaskSucceeded"
                    ):
                        raise RuntimeError(
                            f"{result['run_id']}: the wait ended by {result['wait']['ended_by']}, then {result['reaction']['next_handler']} ran"
                        )
                    longstep[kind].append(result)
                emit(
                    f"longstep run {i + 1}/{runs}: approval {longstep['approval'][-1]['reaction']['from_call_seconds'] * 1000:.1f} ms, event {longstep['event'][-1]['reaction']['from_call_seconds'] * 1000:.1f} ms"
                )
            longstep_seconds = time.perf_counter() - started - stack_seconds

            emit(f"polling: {count_polls} polls on the local clock")
            # Enforcement stays on: the poller's role gets its own least-privilege policy (PollingMachine.deploy).
            machine = PollingMachine(stack, POLL_INTERVAL).deploy()
            t = time.perf_counter()
            counted = measure_polls(machine, starts, count_polls)
            emit(f"polling: {pollers} pollers in real time ({POLL_INTERVAL} s waits)")
            reacted = reaction_times(machine, starts, pollers)
            polling_seconds = time.perf_counter() - t
        finally:
            starts.uninstall()
    from bench.waits import compose

    emit(f"issue 14: delegate.json and release.json, {compose_runs} runs each")
    doc["compose"] = compose.measure(compose_runs, emit)

    three_days = extrapolate(counted["per_poll"], WAIT_SECONDS, POLL_INTERVAL)
    prices = json.loads(PRICES.read_text())
    doc["longstep"] = {kind: longstep_summary(longstep[kind], warmup[kind]) for kind in KINDS}
    doc["polling"] = polling_summary(counted, reacted, three_days, prices, POLL_INTERVAL)
    doc["ratios"] = ratios(doc["longstep"], doc["polling"])
    doc["prices"] = {"file": "infra/prices.json", "region": prices["region"], "as_of": prices["as_of"]}
    doc["timing"] = {
        "stack_start_seconds": round(stack_seconds, 1),
        "longstep_runs_seconds": round(longstep_seconds, 1),
        "polling_seconds": round(polling_seconds, 1),
        "compose_seconds": doc["compose"]["wall_seconds"],
        "total_seconds": round(time.perf_counter() - started, 1),
    }
    doc["machine"] = machine_facts()
    doc["machine"]["load_average_at_start"] = load_before
    return doc


def _approval_timeout_hours(stack: Any) -> float | None:
    """The RequestApproval task's TimeoutSeconds in the deployed definition, in hours."""
    sfn = stack.client("stepfunctions")
    definition = json.loads(sfn.describe_state_machine(stateMachineArn=stack.state_machine_arn)["definition"])

    def find(states: dict[str, Any]) -> float | None:
        for name, state in states.items():
            if name == "RequestApproval" and "TimeoutSeconds" in state:
                return state["TimeoutSeconds"] / 3600
            for sub in (state.get("ItemProcessor"), state.get("Iterator"), *state.get("Branches", [])):
                if sub and (found := find(sub.get("States", {}))) is not None:
                    return found
        return None

    return find(definition.get("States", {}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.waits", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS, help=f"measured runs of each kind (default {DEFAULT_RUNS})")
    parser.add_argument("--polls", type=int, default=DEFAULT_COUNT_POLLS, help=f"vain polls of the counting run (default {DEFAULT_COUNT_POLLS})")
    parser.add_argument("--pollers", type=int, default=DEFAULT_POLLERS, help=f"real-time pollers for the reaction time (default {DEFAULT_POLLERS})")
    parser.add_argument(
        "--compose-runs", type=int, default=DEFAULT_COMPOSE_RUNS, help=f"runs of delegate.json and release.json (default {DEFAULT_COMPOSE_RUNS})"
    )
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--report", type=Path, default=REPORT)
    args = parser.parse_args(argv)
    emit = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    doc = run_bench(args.runs, args.polls, args.pollers, emit, args.compose_runs)
    doc["command"] = "make bench-waits"
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(doc, indent=2) + "\n")
    write_section(args.report, render(doc), BEGIN, END)
    print(f"wrote {args.results} and the waits section of {args.report} in {doc['timing']['total_seconds']} s")
    return 0
