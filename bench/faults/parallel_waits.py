"""The campaign's ``wait_parallel`` entry (issue 24): two waits of one turn on one event, both
taking any signal (``tests/fixtures/wait_parallel_any.json``), and two signals sent to them by a
sender in the campaign's process (``longstep.humans.signals.deliver``, what ``longstep signal``
and the EventBridge target call) once both are parked.

The faults, each once in a case: the response of the sender's K-th ``SendTaskSuccess`` lost (its
retry hears ``TaskTimedOut``, as from a wait that timed out), of the K-th checkpoint write, or a
crash or a zombie at a step of the turn; and each case once more with the answered calls held
until the sender has come back (``hold``), which is how a lost response reaches both waits: the
sender puts the signal back and hands it to the second wait before the first one's call marks it.

The check: the run SUCCEEDED, its two calls took the two signals, one each, and each signal's
entry is consumed. A signal taken by both calls is a duplicate (counted per call beyond the first
that took it); a signal neither took is a lost one (the run differs from the clean run).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ENTRY = "wait_parallel"
FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "wait_parallel_any.json"
EVENT = "ci_finished"
# Virtual seconds the clock is moved by at each look while the waits park (their timeouts are an
# hour: a run parks long before so many looks).
STEP_SECONDS = 2.0
FAULTS = (
    "lost_ack.SendTaskSuccess@0",
    "lost_ack.SendTaskSuccess@1",
    "lost_ack.UpdateItem@0:Checkpoint",
    "lost_ack.UpdateItem@3:Checkpoint",
    "lost_ack.UpdateItem@6:Checkpoint",
    "lost_ack.PutItem@3:Checkpoint",
    "after_model@0",
    "before_tool@0",
    "after_record@0",
    "zombie.after_record@0",
)


# The lost response that reaches both waits, with a crash or a zombie in the calls that race.
COMBINED = (
    ("lost_ack.SendTaskSuccess@0", "before_tool@0"),
    ("lost_ack.SendTaskSuccess@0", "zombie.after_record@0"),
    ("lost_ack.SendTaskSuccess@0", "lost_ack.SendTaskSuccess@2"),
)


def parallel_wait_cases() -> list[dict[str, Any]]:
    """Each fault alone, with and without the answered calls held; the hold alone; the
    combinations, held."""
    out: list[dict[str, Any]] = [{"faults": [], "hold": True}]
    for spec in FAULTS:
        out += [{"faults": [spec]}, {"faults": [spec], "hold": True}]
    return out + [{"faults": list(specs), "hold": True} for specs in COMBINED]


def run_parallel_wait_campaign(progress: Path | None = None, case_timeout: float = 180.0) -> dict[str, Any]:
    """Every case on one stack; rows as ``run_scenario_campaign``'s."""
    from bench.faults.campaign import keep_row
    from longstep import keys
    from longstep.errors import SignalTakenError
    from longstep.humans import signals
    from longstep.store import CheckpointStore
    from longstep_kit.local.faults import parse_fault
    from longstep_kit.local.runner import RunOptions, run_scenario
    from longstep_kit.local.scenario import load_scenario
    from longstep_kit.local.stack import LocalStack
    from longstep_kit.testing.wait import wait_until

    scenario = load_scenario(FIXTURE)
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    count = iter(range(1_000_000))
    with LocalStack() as stack:
        store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
        sfn = stack.client("stepfunctions")

        def run(case: dict[str, Any]) -> dict[str, Any]:
            stack.reset_data()
            run_id = f"par{next(count)}"
            first = len(stack.dispatcher.invocations)
            options = RunOptions(run_id=run_id, approve="external", faults=[parse_fault(s) for s in case["faults"]], timeout_seconds=case_timeout)
            sent = threading.Event()

            def held(invocation: Any) -> None:  # the answered calls start after the sender came back
                if invocation.task == "call_tool" and not sent.wait(case_timeout):
                    raise RuntimeError("the first signal was never sent")

            outcome: dict[str, Any] = {}
            if case.get("hold"):
                stack.dispatcher.before_invoke.append(held)
            try:
                # The clock is held so the waits' hour cannot pass before the signals are sent; it
                # is moved by hand in small steps meanwhile, so a crash's retry backoff still ends.
                with stack.clock.held():
                    runner = threading.Thread(target=lambda: outcome.update(report=run_scenario(stack, scenario, options)), daemon=True)
                    runner.start()

                    def parked() -> bool:
                        new = stack.dispatcher.invocations[first:]
                        if sum(i.task == "wait_for_event" and (i.result or {}).get("status") == "waiting" for i in new) >= 2:
                            return True
                        stack.clock.advance(STEP_SECONDS)
                        return False

                    wait_until("both waits parked", parked, case_timeout)
                    said = [signals.deliver(store, sfn, run_id, EVENT, {"build": 1})]
                    sent.set()
                    said.append(signals.deliver(store, sfn, run_id, EVENT, {"build": 2}))
                runner.join(case_timeout)
            finally:
                sent.set()
                if case.get("hold"):
                    stack.dispatcher.before_invoke.remove(held)
            if "report" not in outcome:
                raise RuntimeError("the run did not finish")
            report = outcome["report"]
            taken = [((s.result.get("content") or {}).get("payload") or {}).get("build") for s in store.steps(run_id) if s.kind == "tool"]
            entries = store.query_prefix(run_id, keys.signal_key(EVENT) + "#")
            # The calls told that the signal they took had gone to the other wait (they parked again).
            again = sum(
                i.task == "call_tool" and (i.error or {}).get("errorType") == SignalTakenError.error_name()
                for i in stack.dispatcher.invocations[first:]
            )
            return {**report, "taken": taken, "entries": [e.get("status") for e in entries], "said": said, "parked_again": again}

        def row_of(case: dict[str, Any], report: dict[str, Any]) -> dict[str, Any]:
            taken = Counter(b for b in report["taken"] if b is not None)
            return {
                **case,
                "fired": not case["faults"] or (bool(report.get("faults_injected")) and not report.get("faults_unfired")),
                "same_run": report["status"] == "SUCCEEDED"
                and sorted(report["taken"], key=str) == [1, 2]
                and report["entries"] == [signals.CONSUMED] * 2,
                "duplicates": sum(n - 1 for n in taken.values()),
                "status": report["status"],
                "cause": report.get("cause"),
                "taken": report["taken"],
                "entries": report["entries"],
                "parked_again": report["parked_again"],
            }

        clean = row_of({"faults": []}, run({"faults": []}))
        if not clean["same_run"]:
            raise RuntimeError(f"the clean run did not take the two signals one each: {clean}")
        for case in parallel_wait_cases():
            case_started = time.perf_counter()
            try:
                row = row_of(case, run(case))
            except Exception as exc:  # noqa: BLE001 - a case that cannot finish is a result
                row = {**case, "fired": None, "same_run": False, "duplicates": None, "error": f"{type(exc).__name__}: {exc}"[:300]}
            keep_row(rows, row, ENTRY, case_started, progress)
    return {"scenario": ENTRY, "cases": rows, "seconds": round(time.perf_counter() - started, 1)}
