"""How fast the local loop is: a long run on the local stack, side by side with AWS Lambda durable
functions' in-process test runner and with moto's Step Functions engine on a trivial loop.

Measured in one process, one after the other, on the same machine (issue 13's goals):

- **Longstep, run phase**: ``run_scenario`` on a started :class:`LocalStack` for a scenario of N
  turns, each calling one read tool (``read_document``), then a final answer: CPU seconds of the
  whole process (every thread: the engine's, the handlers') and wall seconds, for N = 50, 200 and
  400 (per-turn flatness), after one warm-up run.
- **Longstep, whole process**: ``longstep local run`` of the 200-turn scenario as a subprocess,
  with the synthesized template cached (one run before fills the cache): CPU (user + system) and
  wall seconds, deploy included.
- **AWS Lambda durable functions**: ``aws-durable-execution-sdk-python-testing``'s
  ``DurableFunctionTestRunner`` (in-process, time skipped) on a handler whose loop runs 400
  ``context.step`` calls (the 200-turn run's model and tool steps), each returning a small dict.
- **moto's engine, trivial loop**: a Pass -> Choice state machine that loops 400 times (an
  intrinsic counter), on the same local stack: the engine's own cost per state, no Lambda.
- **The anchor of issue 28's target**: the same loop on stock moto, in a process of its own with
  none of Longstep's patches (``bench/speed/anchor.py``), run three times interleaved with the
  rest (first, between the Longstep runs, last): its median CPU.
- **The demo**: ``longstep local run events/scenarios/triage.json --report FILE`` (what ``make
  demo`` runs after setup) as a fresh process, template cached: wall and CPU seconds.

Writes ``bench/results/speed.json`` and the speed section of ``bench/RESULTS.md`` (between its own
markers). ``--profile FILE`` also writes a cProfile of the 200-turn run phase, every thread.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import threading
import time
import statistics
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "bench" / "results" / "speed.json"
REPORT = ROOT / "bench" / "RESULTS.md"
TRIAGE = ROOT / "events" / "scenarios" / "triage.json"
BEGIN, END = "<!-- bench-speed:begin -->", "<!-- bench-speed:end -->"
TURNS = (50, 200, 400)
MAIN_TURNS = 200
STEPS = 400  # the 200-turn run's steps: a model call and a tool call per turn
DOC = "runbook-payments"
GOALS = {"run_phase_cpu_seconds": 5.0, "process_seconds": 8.0, "durable_ratio": 3.0, "flatness": 1.2, "anchor_ratio": 0.6, "demo_seconds": 8.0}


# -- the scenario --------------------------------------------------------------------------------


def scenario_document(turns: int) -> dict[str, Any]:
    """``turns`` turns: each but the last reads one document (a READ tool), the last answers."""
    base = json.loads(TRIAGE.read_text())
    script = {
        str(t): {"text": f"Step {t}: reading on.", "tool_calls": [{"name": "read_document", "input": {"doc_id": DOC}}]} for t in range(turns - 1)
    }
    script[str(turns - 1)] = {"text": f"Summary: read the payments runbook over {turns - 1} turns; nothing to change."}
    return {
        "name": f"speed-{turns}",
        "description": f"{turns} turns: {turns - 1} reads of one document, then a summary",
        "input": {"goal": "Read the payments runbook and summarize it.", "agent": "triage", "max_turns": turns + 1},
        "world": {"documents": [d for d in base["world"]["documents"] if d["doc_id"] == DOC], "tickets": []},
        "turns": script,
    }


# -- measuring -----------------------------------------------------------------------------------


def timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    """``fn()``, its process CPU seconds (every thread) and its wall seconds."""
    cpu, wall = time.process_time(), time.perf_counter()
    result = fn()
    return result, time.process_time() - cpu, time.perf_counter() - wall


class AllThreadsProfile:
    """cProfile of every thread started while it is on (the engine's threads run the handlers)."""

    def __init__(self) -> None:
        self.profiles: list[cProfile.Profile] = []
        self._lock = threading.Lock()

    def _start_in_thread(self, *_: Any) -> None:
        profile = cProfile.Profile(time.thread_time)
        with self._lock:
            self.profiles.append(profile)
        profile.enable()  # replaces this hook for the thread

    def __enter__(self) -> "AllThreadsProfile":
        threading.setprofile(self._start_in_thread)
        main = cProfile.Profile(time.thread_time)
        self.profiles.append(main)
        main.enable()
        return self

    def __exit__(self, *_: Any) -> None:
        threading.setprofile(None)
        self.profiles[0].disable()

    def write(self, path: Path, top: int = 40) -> str:
        stats = pstats.Stats(self.profiles[0])
        for profile in self.profiles[1:]:
            try:
                stats.add(profile)
            except TypeError:  # a thread that never returned to Python
                pass
        stats.dump_stats(str(path))
        text = path.with_suffix(".txt")
        with text.open("w") as out:
            pstats.Stats(str(path), stream=out).sort_stats("cumulative").print_stats(top)
            pstats.Stats(str(path), stream=out).sort_stats("tottime").print_stats(top)
        return str(text)


def longstep_runs(profile: Path | None, emit: Callable[[str], None], between: Callable[[], None] = lambda: None) -> dict[str, Any]:
    """The run phase at each size, on one started stack."""
    from longstep_kit.local.runner import RunOptions, run_scenario
    from longstep_kit.local.scenario import Scenario
    from longstep_kit.local.stack import LocalStack

    out: dict[str, Any] = {}
    stack, start_cpu, start_wall = timed(lambda: LocalStack().__enter__())
    out["stack_start"] = {"cpu_seconds": start_cpu, "wall_seconds": start_wall}
    if stack.enforcement.policies is None:
        stack.__exit__(None, None, None)
        raise RuntimeError("the local stack's enforcement is off: the bench measures what AWS would run")
    try:
        for label, turns in (("warmup", 50), *((str(t), t) for t in TURNS)):
            scenario = Scenario.model_validate(scenario_document(turns))
            stack.reset_data()
            options = RunOptions(run_id=f"speed-{label}", timeout_seconds=1800)
            if profile is not None and turns == MAIN_TURNS:
                with AllThreadsProfile() as prof:
                    report, cpu, wall = timed(lambda: run_scenario(stack, scenario, options))
                out["profile"] = prof.write(profile)
            else:
                report, cpu, wall = timed(lambda: run_scenario(stack, scenario, options))
            if report["status"] != "SUCCEEDED":
                raise RuntimeError(f"speed-{turns}: {report['status']}: {report.get('error')}: {report.get('cause')}")
            out[label] = {
                "turns": turns,
                "cpu_seconds": cpu,
                "wall_seconds": wall,
                "cpu_per_turn_ms": 1000 * cpu / turns,
                "lambda_invocations": report["lambda_invocations"],
                "state_transitions": report["state_transitions"],
                "executions": report["executions"],
            }
            emit(f"longstep {label}: {turns} turns, {cpu:.2f} s CPU, {wall:.2f} s wall")
            if turns == MAIN_TURNS:
                between()
        out["moto_loop"] = moto_loop(stack)
        emit(f"moto loop: {out['moto_loop']['cpu_seconds']:.2f} s CPU")
    finally:
        stack.__exit__(None, None, None)
    return out


def moto_loop(stack: Any) -> dict[str, Any]:
    """moto's engine alone: Pass (count) -> Choice, 400 times, on the local stack."""
    from bench.speed.anchor import LOOP

    sfn = stack.client("stepfunctions")
    definition = LOOP
    arn = sfn.create_state_machine(name="speed-moto-loop", definition=json.dumps(definition), roleArn="arn:aws:iam::123456789012:role/speed")[
        "stateMachineArn"
    ]

    def run() -> dict[str, Any]:
        from longstep_kit.testing.wait import wait_execution

        execution = sfn.start_execution(stateMachineArn=arn, input=json.dumps({"i": 0}))["executionArn"]
        return wait_execution(sfn, execution, 600)

    described, cpu, wall = timed(run)
    if described["status"] != "SUCCEEDED" or json.loads(described["output"])["i"] != STEPS:
        raise RuntimeError(f"moto loop: {described['status']} {described.get('output')}")
    return {"steps": STEPS, "states_entered": 2 * STEPS + 1, "cpu_seconds": cpu, "wall_seconds": wall}


def durable_functions(emit: Callable[[str], None]) -> dict[str, Any]:
    """AWS Lambda durable functions' in-process test runner on a 400-step loop."""
    from importlib import metadata

    from aws_durable_execution_sdk_python import DurableContext, durable_execution
    from aws_durable_execution_sdk_python_testing import DurableFunctionTestRunner

    @durable_execution
    def handler(event: Any, context: DurableContext) -> dict[str, Any]:
        total = 0
        for i in range(STEPS):
            total += context.step(lambda _step, i=i: {"i": i, "text": f"step {i}"}, name=f"step-{i}")["i"]
        return {"total": total}

    def run() -> Any:
        with DurableFunctionTestRunner(handler=handler) as runner:
            return runner.run(input=json.dumps({}), timeout=600)

    out: dict[str, Any] = {}
    for label in ("warmup", "measured"):
        result, cpu, wall = timed(run)
        if json.loads(result.result)["total"] != STEPS * (STEPS - 1) // 2:
            raise RuntimeError(f"durable functions: {result.status} {result.result}")
        out[label] = {"status": str(result.status), "cpu_seconds": cpu, "wall_seconds": wall}
        emit(f"durable functions ({label}): {STEPS} steps, {cpu:.2f} s CPU, {wall:.2f} s wall")
    out["steps"] = STEPS
    out["versions"] = {d: metadata.version(d) for d in ("aws-durable-execution-sdk-python", "aws-durable-execution-sdk-python-testing")}
    return out


def run_bench(profile: Path | None, emit: Callable[[str], None]) -> dict[str, Any]:
    from bench.machine import machine_facts
    from bench.speed.processes import demo_process, stock_anchor, whole_process

    started = time.perf_counter()
    load_before = [round(x, 2) for x in os.getloadavg()]
    doc: dict[str, Any] = {"generated_by": "bench/speed (make bench-speed)"}
    anchors = [stock_anchor(emit)]
    doc["durable_functions"] = durable_functions(emit)
    doc["longstep"] = longstep_runs(profile, emit, between=lambda: anchors.append(stock_anchor(emit)))
    doc["process"] = whole_process(emit)
    doc["demo"] = demo_process(emit)
    anchors.append(stock_anchor(emit))
    doc["stock_moto_loop"] = {
        "runs": anchors,
        "median_cpu_seconds": statistics.median(a["measured"]["cpu_seconds"] for a in anchors),
        "median_wall_seconds": statistics.median(a["measured"]["wall_seconds"] for a in anchors),
    }
    doc["enforcement"] = (
        "the local stack's AWS enforcement on (IAM against the synthesized roles, payload and history limits, ASL strictness; TTL and the virtual clock: docs/local-fidelity.md)"
    )
    ls, df, moto = doc["longstep"], doc["durable_functions"]["measured"], doc["longstep"]["moto_loop"]
    main = ls[str(MAIN_TURNS)]
    doc["ratios"] = {
        "longstep_run_cpu_over_durable_cpu": main["cpu_seconds"] / df["cpu_seconds"],
        "longstep_run_wall_over_durable_wall": main["wall_seconds"] / df["wall_seconds"],
        "longstep_run_cpu_over_moto_loop_cpu": main["cpu_seconds"] / moto["cpu_seconds"],
        "per_turn_cpu_400_over_50": ls["400"]["cpu_per_turn_ms"] / ls["50"]["cpu_per_turn_ms"],
        "longstep_run_cpu_over_stock_moto_loop_cpu": main["cpu_seconds"] / doc["stock_moto_loop"]["median_cpu_seconds"],
    }
    doc["timing"] = {"total_seconds": round(time.perf_counter() - started, 1)}
    doc["machine"] = machine_facts()
    doc["machine"]["load_average_at_start"] = load_before
    return doc


# -- the report ----------------------------------------------------------------------------------


def _verdict(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def render(doc: dict[str, Any]) -> str:
    ls, df, proc = doc["longstep"], doc["durable_functions"], doc["process"]["measured"]
    moto, r, m = ls["moto_loop"], doc["ratios"], doc["machine"]
    stock, demo = doc["stock_moto_loop"], doc["demo"]["measured"]
    main = ls[str(MAIN_TURNS)]
    lines = [
        BEGIN,
        "## Speed of the local loop: Longstep vs durable functions' test runner vs moto's engine (issues 13 and 28)",
        "",
        "Generated by `bench/speed/` (do not edit by hand between the markers). Regenerate with:",
        "",
        "```",
        "make bench-speed         # installs .[bench] into .venv, then the line below",
        ".venv/bin/python -m bench.speed",
        "```",
        "",
        f"All in one bench run, one after the other, on this machine (nproc {m['nproc']}, load average {m['load_average_at_start'][0]:.1f} "
        f"at the start: CPU seconds move little with other work, wall seconds do). CPU is the process's (every thread). "
        f"Every Longstep run with {doc.get('enforcement', 'enforcement unknown')}.",
        "",
        "### Goals",
        "",
        "| goal | measured | verdict |",
        "|---|---|---|",
        f"| {MAIN_TURNS}-turn run phase <= {GOALS['run_phase_cpu_seconds']:g} s CPU | {main['cpu_seconds']:.2f} s CPU ({main['wall_seconds']:.2f} s wall) "
        f"| {_verdict(main['cpu_seconds'] <= GOALS['run_phase_cpu_seconds'])} |",
        f"| whole `local run` process <= {GOALS['process_seconds']:g} s, template cached | {proc['wall_seconds']:.2f} s wall, {proc['cpu_seconds']:.2f} s CPU "
        f"| {_verdict(proc['wall_seconds'] <= GOALS['process_seconds'])} |",
        f"| within {GOALS['durable_ratio']:g}x of durable functions' runner ({STEPS} steps) | {r['longstep_run_cpu_over_durable_cpu']:.1f}x its CPU "
        f"({r['longstep_run_wall_over_durable_wall']:.1f}x its wall time) | {_verdict(r['longstep_run_cpu_over_durable_cpu'] <= GOALS['durable_ratio'])} |",
        f"| per-turn time flat: 400 turns within {GOALS['flatness']:g}x of 50 | {r['per_turn_cpu_400_over_50']:.2f}x "
        f"({ls['400']['cpu_per_turn_ms']:.1f} vs {ls['50']['cpu_per_turn_ms']:.1f} ms CPU per turn) | {_verdict(r['per_turn_cpu_400_over_50'] <= GOALS['flatness'])} |",
        f"| issue 28: {MAIN_TURNS}-turn run phase <= {GOALS['anchor_ratio']:g}x the CPU of stock moto's engine on a trivial {STEPS}-step loop "
        f"(a process of its own) | {r['longstep_run_cpu_over_stock_moto_loop_cpu']:.1f}x ({main['cpu_seconds']:.2f} vs {stock['median_cpu_seconds']:.2f} s CPU) "
        f"| {_verdict(r['longstep_run_cpu_over_stock_moto_loop_cpu'] <= GOALS['anchor_ratio'])} |",
        f"| issue 28: the demo process (`make demo` after setup: `longstep local run events/scenarios/triage.json`) < {GOALS['demo_seconds']:g} s, "
        f"template cached | {demo['wall_seconds']:.2f} s wall, {demo['cpu_seconds']:.2f} s CPU | {_verdict(demo['wall_seconds'] < GOALS['demo_seconds'])} |",
        "",
        "### Side by side",
        "",
        "| | steps | CPU s | wall s | CPU ms per step |",
        "|---|---:|---:|---:|---:|",
    ]
    for turns in TURNS:
        row = ls[str(turns)]
        lines.append(
            f"| Longstep run phase, {turns} turns ({row['lambda_invocations']} Lambda invocations, {row['state_transitions']} transitions, "
            f"{row['executions']} executions) | {2 * turns - 1} | {row['cpu_seconds']:.2f} | {row['wall_seconds']:.2f} | {1000 * row['cpu_seconds'] / (2 * turns - 1):.2f} |"
        )
    lines += [
        f"| Longstep whole `local run` process, {MAIN_TURNS} turns (deploy included, template cached) | {2 * MAIN_TURNS - 1} | {proc['cpu_seconds']:.2f} | {proc['wall_seconds']:.2f} | |",
        f"| durable functions test runner (`DurableFunctionTestRunner`, time skipped) | {STEPS} | {df['measured']['cpu_seconds']:.2f} | {df['measured']['wall_seconds']:.2f} "
        f"| {1000 * df['measured']['cpu_seconds'] / STEPS:.2f} |",
        f"| moto's Step Functions engine, Pass -> Choice loop (no Lambda), in the local stack (Longstep's moto patches) | {STEPS} | {moto['cpu_seconds']:.2f} "
        f"| {moto['wall_seconds']:.2f} | {1000 * moto['cpu_seconds'] / STEPS:.2f} |",
        f"| the same loop on stock moto, a process of its own (issue 28's anchor; median of {len(stock['runs'])}: "
        + ", ".join(f"{a['measured']['cpu_seconds']:.2f}" for a in stock["runs"])
        + f" s CPU) | {STEPS} | {stock['median_cpu_seconds']:.2f} | {stock['median_wall_seconds']:.2f} | {1000 * stock['median_cpu_seconds'] / STEPS:.2f} |",
        f"| the demo process: the triage scenario, deploy included, template cached | | {demo['cpu_seconds']:.2f} | {demo['wall_seconds']:.2f} | |",
        "",
        f"Longstep's {MAIN_TURNS}-turn run phase is {r['longstep_run_cpu_over_durable_cpu']:.1f}x the durable-functions runner's CPU and "
        f"{r['longstep_run_cpu_over_moto_loop_cpu']:.1f}x the CPU of moto's engine looping {STEPS} times with nothing to do. Stack start "
        f"(deploy into moto, template cached): {ls['stack_start']['wall_seconds']:.1f} s wall.",
        "",
    ]
    lines += doc.get("notes", [])
    lines += [
        "",
        "### Machine and versions",
        "",
        f"- nproc {m['nproc']}, {m['cpu'] or 'CPU unknown'}, {m['memory']}; Python {m['python']}",
        "- " + ", ".join(f"{k} {v}" for k, v in {**m["versions"], **df["versions"]}.items() if v),
        f"- commit {m['commit']}" + (" with uncommitted changes in the working tree" if m["uncommitted_changes"] else ""),
        f"- the bench took {doc['timing']['total_seconds']:.0f} s",
        END,
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.speed", description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--report", type=Path, default=REPORT)
    parser.add_argument("--notes", type=Path, help="a Markdown file of notes (the gap and its cause) put under the tables")
    parser.add_argument("--profile", type=Path, help=f"write a cProfile of the {MAIN_TURNS}-turn run phase here (and a .txt summary)")
    parser.add_argument("--render-only", action="store_true", help="do not measure: render --results again (with --notes)")
    args = parser.parse_args(argv)
    emit = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    if args.render_only:
        doc = json.loads(args.results.read_text())
    else:
        doc = run_bench(args.profile, emit)
    doc["command"] = "make bench-speed"
    if args.notes:
        doc["notes"] = args.notes.read_text().rstrip("\n").splitlines()
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(doc, indent=2) + "\n")
    from bench.sections import write_section

    write_section(args.report, render(doc), BEGIN, END)
    print(f"wrote {args.results} and the speed section of {args.report} in {doc['timing']['total_seconds']} s")
    return 0
