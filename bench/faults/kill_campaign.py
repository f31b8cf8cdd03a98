"""The campaign's killed workers: ``triage.json`` on a served stack whose Lambdas run in worker
processes (``LocalServer(isolate_lambdas=True)``, as ``longstep local serve --isolate-lambdas``),
each case a real ``SIGKILL`` of a worker between a write the endpoint carried out and its response
(``kill.TASK@N[:OPERATION[:TARGET]]``, docs/durability.md). Each run is compared with the served
stack's clean run as the other entries are (``campaign.same_agent_run``: status, transcript,
effects from the agents' own ledgers, 0 duplicates), and a case counts as fired only when a
worker really died by ``SIGKILL``."""

from __future__ import annotations

import logging
import signal
import time
from pathlib import Path
from typing import Any

ENTRY = "triage.kill"
SCENARIO = "triage"
# Each names the write it follows by task, operation and table: the same write every run. Turn 2
# files a ticket (keyed), turn 3 updates two in parallel, turn 1 stores a 300 KB tool output in
# S3, turn 5 sends an approved email (at most once, its intent marker and its outbox write).
KILLS = (
    "kill.init_run@0",  # the run's first write (its record) is made, the worker gone before Init returns
    "kill.ModelTurn@0:PutItem:Checkpoints",  # the first model step's claim is written, its worker gone
    "kill.model_turn@3:PutItem:Checkpoints",  # a later turn's claim, after a replayed history
    "kill.model_turn@1:UpdateItem:Checkpoints",  # the model turns' second checkpoint update (a step's result or a renewal)
    "kill.call_tool@0:PutObject",  # a large tool output is in S3, its step not recorded
    "kill.call_tool@0:PutItem:tickets",  # file_ticket's ticket is filed, its step not recorded
    "kill.call_tool@1:UpdateItem:tickets",  # one of update_ticket's two parallel updates is written
    "kill.CallTool@0:PutItem:outbox",  # the approved email is in the outbox, its step not recorded
    "kill.request_approval@0:PutItem:Checkpoints",  # the approval step's claim, before any request
    "kill.request_approval@0:PutItem:Approvals",  # the approval request is stored, never notified
    "kill.finish@0",  # Finish's first write (the run's end) is made, its worker gone
)


def kill_cases() -> list[dict[str, Any]]:
    """Each kill alone, then three in one run."""
    out: list[dict[str, Any]] = [{"faults": [spec]} for spec in KILLS]
    out.append({"faults": ["kill.model_turn@3:PutItem:Checkpoints", "kill.CallTool@0:PutItem:outbox", "kill.request_approval@2:PutItem:Checkpoints"]})
    return out


def run_kill_campaign(progress: Path | None = None, case_timeout: float = 180.0) -> dict[str, Any]:
    """Every kill case on one served stack with isolated Lambdas; rows as ``run_scenario_campaign``'s."""
    from bench.faults.campaign import SCENARIOS, keep_row, same_agent_run, timer_shifts, timer_view
    from longstep_kit.local.faults import parse_fault
    from longstep_kit.local.runner import RunOptions, run_scenario
    from longstep_kit.local.scenario import load_scenario
    from longstep_kit.local.serve import LocalServer, free_port
    from longstep_kit.local.stack import LocalStack

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # the endpoint's request log: not the campaign's output
    scenario = load_scenario(SCENARIOS / f"{SCENARIO}.json")
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    count = iter(range(1_000_000))
    with LocalStack() as stack:
        server = LocalServer(stack, port=free_port(), isolate_lambdas=True)
        server.start()
        try:

            def run(case: dict[str, Any]) -> dict[str, Any]:
                stack.reset_data()
                first, waited = len(stack.dispatcher.invocations), len(stack.clock.retry_delays)
                plan = [parse_fault(spec) for spec in case.get("faults", [])]
                options = RunOptions(run_id=SCENARIO, execution_name=f"k{next(count)}", faults=plan, timeout_seconds=case_timeout)
                report = run_scenario(stack, scenario, options)
                invocations = stack.dispatcher.invocations[first:]
                return {
                    **report,
                    **timer_view(stack, SCENARIO),
                    "retried_seconds": sum(stack.clock.retry_delays[waited:]),
                    "sigkilled": sum(inv.exit_code == -signal.SIGKILL for inv in invocations),
                    "in_workers": all(inv.pid is not None for inv in invocations),
                }

            clean = run({})
            if not clean["in_workers"]:
                raise RuntimeError("the clean run's Lambdas did not all run in worker processes")
            for case in kill_cases():
                case_started = time.perf_counter()
                try:
                    report = run(case)
                except Exception as exc:  # noqa: BLE001 - a case that cannot finish is a result
                    row = {**case, "fired": None, "same_run": False, "duplicates": None, "error": f"{type(exc).__name__}: {exc}"[:300]}
                else:
                    fired = bool(report.get("faults_injected")) and report["sigkilled"] == len(report["faults_injected"])
                    row = {
                        **case,
                        "fired": fired,
                        # The clean run's escalations too: a kill that ends well only through a human is not the clean run.
                        "same_run": same_agent_run(report, clean) and report["in_workers"] and report["escalations"] == clean["escalations"],
                        "duplicates": report["effects"]["duplicate_effects"],
                        "status": report["status"],
                        "cause": report.get("cause"),
                        "sigkilled": report["sigkilled"],
                        "escalations": len(report.get("escalations") or []),
                    }
                    if row["same_run"] and report["transcript_sha256"] != clean["transcript_sha256"]:
                        row["timers_later_by"] = timer_shifts(report, clean)
                keep_row(rows, row, ENTRY, case_started, progress)
        finally:
            server.stop()
    return {"scenario": ENTRY, "cases": rows, "seconds": round(time.perf_counter() - started, 1)}
