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

Writes ``bench/results/waits.json`` and the waits section of ``bench/RESULTS.md`` (between its own
markers; the rest of the file is left as it is).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.waits.params import EVENT, EVENT_TIMEOUT_SECONDS, KINDS, WAIT_SECONDS
from bench.sections import write_section
from bench.waits.render import BEGIN, END, render

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the dispatcher imports bench.waits.poll_handlers by module name
    sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "bench" / "results" / "waits.json"
REPORT = ROOT / "bench" / "RESULTS.md"
PRICES = ROOT / "src" / "longstep_kit" / "prices.json"
POLL_INTERVAL = 5
DEFAULT_RUNS = 20
DEFAULT_COUNT_POLLS = 720  # one virtual hour of 5 s polls, for the per-poll counts
DEFAULT_POLLERS = 20
DEFAULT_COMPOSE_RUNS = 5  # runs of delegate.json and of release.json (issue 14)
SIGNAL = {"status": "green", "build": 42}


# -- scenarios -------------------------------------------------------------------------------


def scenario(kind: str) -> Any:
    """A two-turn run whose only tool call waits: an email needing approval, or a wait_for event."""
    from longstep_kit.local.scenario import Scenario

    if kind == "approval":
        call = {
            "name": "send_email",
            "input": {"to": "payments-oncall@example.com", "subject": "Checkout incident", "body": "The provider timeout caused the outage."},
        }
        final = "Summary: the on-call was emailed once the approval came, three days later."
    else:
        call = {"name": "wait_for", "input": {"event": EVENT, "match": {"status": "green"}, "timeout_seconds": EVENT_TIMEOUT_SECONDS}}
        final = "Summary: CI finished green (build 42) after three days; nothing else to do."
    text = "Asking to email the on-call." if kind == "approval" else "Waiting for CI."
    return Scenario.model_validate(
        {
            "name": f"bench-waits-{kind}",
            "description": f"one tool call that waits 3 days ({kind}), then a summary",
            "input": {
                "goal": "Tell the on-call about the checkout incident." if kind == "approval" else "Ship once CI is green.",
                "agent": "triage",
                "max_turns": 3,
            },
            "turns": {"0": {"text": text, "tool_calls": [call]}, "1": {"text": final}},
        }
    )


# -- one Longstep run --------------------------------------------------------------------------


class TimedSfn:
    """The Step Functions client, with the time of the ``SendTaskSuccess`` request noted."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.sent_at: float | None = None
        self.returned_at: float | None = None

    def send_task_success(self, **kwargs: Any) -> Any:
        self.sent_at = time.perf_counter()
        try:
            return self._client.send_task_success(**kwargs)
        finally:
            self.returned_at = time.perf_counter()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


class ParkProbe:
    """A dispatcher hook: notes when the waiting task of ``run_id`` has parked on its token."""

    def __init__(self, kind: str, run_id: str) -> None:
        self.kind, self.run_id = kind, run_id
        self.parked = threading.Event()
        self.at: float | None = None
        self.result: dict[str, Any] = {}

    def on_invoke(self, inv: Any) -> None:
        task = inv.task
        result = inv.result if isinstance(inv.result, dict) and inv.error is None else {}
        if result.get("run_id") != self.run_id or self.parked.is_set():
            return
        if (self.kind == "approval" and task == "request_approval" and result.get("status") == "pending") or (
            self.kind == "event" and task == "wait_for_event" and result.get("status") == "waiting"
        ):
            self.at = time.perf_counter()
            self.result = result
            self.parked.set()


def _history(sfn: Any, arn: str) -> list[dict[str, Any]]:
    from bench.waits.polling import history

    return history(sfn, arn)


def _execution_arn(stack: Any, name: str) -> str:
    return stack.state_machine_arn.replace(":stateMachine:", ":execution:") + ":" + name


def measure_wait(stack: Any, starts: Any, kind: str, run_id: str) -> dict[str, Any]:
    """One run that waits ``WAIT_SECONDS`` virtual seconds for ``kind``; the counts and the reaction."""
    from longstep_kit.local.runner import RunOptions, run_scenario
    from longstep.humans import signals
    from longstep.humans.decisions import Decision, decide
    from longstep.humans.table import ApprovalTable
    from longstep.store import CheckpointStore

    sfn = stack.client("stepfunctions")
    probe = ParkProbe(kind, run_id)
    outcome: dict[str, Any] = {}

    def background() -> None:
        try:
            outcome["report"] = run_scenario(stack, scenario(kind), RunOptions(run_id=run_id, approve="external", timeout_seconds=120))
        except BaseException as exc:  # noqa: BLE001 - reported below
            outcome["error"] = exc

    stack.dispatcher.after_invoke.append(probe.on_invoke)
    clock_before = stack.clock.skipped_seconds
    thread = threading.Thread(target=background, daemon=True)
    # The bench holds the clock: nothing skips while the run parks; then it moves time 3 days
    # ahead itself (the timers due by then would fire: the timeouts are later, 4 and 7 days).
    stack.clock.hold()
    try:
        thread.start()
        if not probe.parked.wait(60):
            raise RuntimeError(f"{run_id}: the {kind} wait never started: {outcome.get('error')}")
        virtual_at_park = stack.clock.time()
        stack.clock.advance(WAIT_SECONDS)
        virtual_waited = stack.clock.time() - virtual_at_park
        t0 = time.perf_counter()
        timed = TimedSfn(sfn)
        if kind == "approval":
            table = ApprovalTable(stack.outputs["ApprovalsTableName"], stack.client("dynamodb"))
            decide(table, timed, probe.result["approval_id"], Decision(decision="approve", approver="bench-waits"))
            delivered = "decided"
        else:
            store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
            delivered = signals.deliver(store, timed, run_id, EVENT, SIGNAL)
        t_call_done = time.perf_counter()
    finally:
        stack.clock.release()
        stack.dispatcher.after_invoke.remove(probe.on_invoke)
    thread.join(120)
    if thread.is_alive():
        raise RuntimeError(f"{run_id}: the run did not finish")
    if "error" in outcome:
        raise outcome["error"]
    report = outcome["report"]
    # The wait, as the execution recorded it: from the task parking on its token (TaskSubmitted)
    # to the token's answer arriving (TaskSucceeded). Everything the engine did in between is there.
    events = _history(sfn, _execution_arn(stack, run_id))
    submitted = [i for i, e in enumerate(events) if e["type"] == "TaskSubmitted"]
    if len(submitted) != 1:
        raise RuntimeError(f"{run_id}: expected one task-token wait, found {len(submitted)}")
    ended = next(i for i in range(submitted[0] + 1, len(events)) if events[i]["type"] in ("TaskSucceeded", "TaskFailed", "TaskTimedOut"))
    during = events[submitted[0] + 1 : ended]
    engine_wait = (events[ended]["timestamp"] - events[submitted[0]]["timestamp"]).total_seconds()
    invoked_during = starts.between(probe.at, t0)
    nxt = starts.first_after(t0)
    return {
        "run_id": run_id,
        "kind": kind,
        "status": report["status"],
        "delivered": delivered,
        "wait": {
            "virtual_seconds_target": WAIT_SECONDS,
            "wall_seconds": round(t0 - probe.at, 4),
            "virtual_seconds_on_local_clock": round(virtual_waited),
            "history_wall_seconds": round(engine_wait, 4),
            "ended_by": events[ended]["type"],
            "lambda_invocations": len(invoked_during),
            "state_transitions": sum(1 for e in during if e["type"].endswith("StateEntered")),
            "history_events": len(during),
            "history_event_types": sorted({e["type"] for e in during}),
            "engine_virtual_seconds_skipped": stack.clock.skipped_seconds - clock_before,
        },
        "reaction": {
            "next_handler": nxt.handler if nxt else None,
            "from_call_seconds": round(nxt.start - t0, 5) if nxt else None,
            "from_send_task_success_seconds": round(nxt.start - timed.sent_at, 5) if nxt and timed.sent_at else None,
            "call_seconds": round(t_call_done - t0, 5),
            "before_send_task_success_seconds": round(timed.sent_at - t0, 5) if timed.sent_at else None,
        },
        "run": {
            "lambda_invocations": report["lambda_invocations"],
            "state_transitions": report["state_transitions"],
            "history_events": report["history_events"],
            "wall_seconds": report["wall_seconds"],
            "output": report.get("output"),
        },
    }


# -- statistics and facts ------------------------------------------------------------------------


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


def machine_facts() -> dict[str, Any]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split("MemTotal:")[1].split()[0])
        mem = f"{kb / 1024**2:.1f} GiB"
    except (OSError, IndexError, ValueError):
        pass
    versions = {}
    for dist in ("moto", "boto3", "botocore", "aws-cdk-lib", "aws-lambda-powertools"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    return {
        "nproc": os.cpu_count(),
        "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
        "cpu": cpu,
        "memory": mem,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": versions,
        "commit": git("rev-parse", "--short", "HEAD"),
        "uncommitted_changes": bool(git("status", "--porcelain", "--untracked-files=no")),
    }


def polling_cost(prices: dict[str, Any], counts: dict[str, Any], check_ms: float, memory_mb: int = 128) -> dict[str, float]:
    """List price of a polled wait (us-east-1, ``src/longstep_kit/prices.json``): transitions, Lambda requests
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


# -- the whole bench -----------------------------------------------------------------------------


def run_bench(runs: int, count_polls: int, pollers: int, emit: Any, compose_runs: int = DEFAULT_COMPOSE_RUNS) -> dict[str, Any]:
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
                        result["reaction"]["next_handler"] != "longstep.handlers.call_tool.lambda_handler"
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

    per_poll = counted["per_poll"]
    three_days = extrapolate(per_poll, WAIT_SECONDS, POLL_INTERVAL)
    prices = json.loads(PRICES.read_text())
    doc["longstep"] = {}
    for kind in KINDS:
        rows = longstep[kind]
        doc["longstep"][kind] = {
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
            "warmup": warmup[kind],
        }
    reaction_poll = summarize(reacted["samples_seconds"])
    reacted["summary"] = {
        "wait_for_check": summarize(reacted["wait_for_check_seconds"]),
        "check_to_next_step": summarize(reacted["check_to_next_step_seconds"]),
        "poll_period": summarize(reacted["poll_period_seconds"]),
        # What the stratified plan gives without any latency: the midpoints of the slices.
        "planned": summarize(reacted["planned_wait_seconds"]),
    }
    doc["polling"] = {
        "design": "Check (Lambda: GetItem on the decision record) -> Decided (Choice) -> WaitInterval (Wait 5 s) -> Check ...; NextStep (Lambda) once decided",
        "interval_seconds": POLL_INTERVAL,
        "counted": counted,
        "three_days": three_days,
        "history_limit": {
            "events_per_execution": 25_000,
            "polls_per_execution": int(25_000 // per_poll["history_events"]) if per_poll["history_events"] else None,
            "executions_needed": math.ceil(three_days["history_events"] / 25_000),
        },
        "reaction": {**reacted, "seconds": reaction_poll},
        "cost_3_days_usd": polling_cost(prices, three_days, counted["check_ms_local"]),
    }
    med = {k: doc["longstep"][k]["reaction_seconds"]["from_call"]["median"] for k in KINDS}
    p95 = {k: doc["longstep"][k]["reaction_seconds"]["from_call"]["p95"] for k in KINDS}
    doc["ratios"] = {
        "polling_over_longstep_reaction_median": {k: reaction_poll["median"] / med[k] for k in KINDS},
        "polling_over_longstep_reaction_p95": {k: reaction_poll["p95"] / p95[k] for k in KINDS},
        "polling_wait_transitions_over_longstep_run_transitions": {
            k: three_days["state_transitions"] / max(doc["longstep"][k]["run"]["state_transitions"]) for k in KINDS
        },
        "polling_wait_invocations_over_longstep_run_invocations": {
            k: three_days["lambda_invocations"] / max(doc["longstep"][k]["run"]["lambda_invocations"]) for k in KINDS
        },
    }
    doc["prices"] = {"file": "src/longstep_kit/prices.json", "region": prices["region"], "as_of": prices["as_of"]}
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
