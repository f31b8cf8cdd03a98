"""The report of a local workflow run: its log (and the log's hash), its child agent runs (their
transcripts' hashes and effects, as an agent run's report counts them), what ran while it slept.

The log's hash leaves out the values that differ from run to run by design (``now()``, random
values, sleeps' wake times); a child's outcome is in it (the agent's final answer), and each
child's own transcript hash is reported beside it: a crash campaign compares both with a clean run.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from longstep import keys
from longstep.contract.run import RunRecord
from longstep.claims import is_claim
from longstep.messages import transcript_sha256
from longstep.store import CheckpointStore, step_record
from longstep.child_runs import children
from longstep.transcript import transcript
from longstep.workflows import log
from longstep_kit.local.report import effects
from longstep_kit.local.stack import LocalStack

# Recorded values that differ from run to run by design; the log's hash leaves them out.
UNSTABLE = (log.NOW, log.RANDOM, log.UUID, log.SLEEP, log.TIMER)


def build_workflow_report(
    stack: LocalStack,
    scenario: str,
    workflow: str,
    run_id: str,
    described: dict[str, Any],
    events: list[dict[str, Any]],
    invocations: list[tuple[float, Any]],
) -> dict[str, Any]:
    """The report of workflow run ``run_id`` (``invocations``: its function's, with their virtual times)."""
    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
    steps = [step_record(i) for i in store.query_prefix(run_id, log.STEP_PREFIX) if not is_claim(i)]
    stable = [(s.sk, s.kind, s.name, None if s.kind in UNSTABLE else s.result) for s in steps]
    output = json.loads(described["output"]) if described.get("output") else None
    advanced = [inv for _, inv in invocations if inv.event.get("action") != "park" and inv.error is None]
    kids = child_runs(stack, store, run_id)
    return {
        "scenario": scenario,
        "run_id": run_id,
        "workflow": workflow,
        "status": described["status"],
        "output": output,
        "error": described.get("error"),
        "cause": described.get("cause"),
        "steps": [{"sk": s.sk, "kind": s.kind, "name": s.name} for s in steps],
        "steps_executed": sum(int((inv.result or {}).get("steps_executed", 0)) for inv in advanced),
        "lambda_invocations": len(invocations),
        "failed_invocations": sum(1 for _, inv in invocations if inv.error is not None),
        "state_transitions": sum(1 for e in events if e["type"].endswith("StateEntered")),
        "history_events": len(events),
        "waits": waits(invocations, events),
        "children": kids,
        "duplicate_effects": sum(child["effects"]["duplicate_effects"] for child in kids),
        "log_sha256": hashlib.sha256(json.dumps(stable, sort_keys=True, default=str).encode()).hexdigest(),
    }


def child_runs(stack: LocalStack, store: CheckpointStore, run_id: str) -> list[dict[str, Any]]:
    """The child agent runs of the workflow's ``ctx.agent`` calls: status, transcript hash, effects."""
    out = []
    for child in children(store, run_id):
        child_id = child["child_run_id"]
        stored = store.get(child_id, keys.RUN_RECORD)
        run = None if stored is None else RunRecord.from_dict(stored)
        messages = transcript(run, store.steps(child_id)) if run else []
        out.append(
            {
                "position": child["turn"],
                "agent": child["subagent"],
                "run_id": child_id,
                "status": child["status"],
                "transcript_sha256": transcript_sha256(messages),
                "effects": effects(stack, child_id, run.agent if run else None),
            }
        )
    return out


def waits(invocations: list[tuple[float, Any]], events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each sleep: how long, and what ran meanwhile (Lambda invocations, history events)."""
    out = []
    for at, inv in invocations:
        directive = inv.result if inv.error is None and isinstance(inv.result, dict) else {}
        if directive.get("next") != log.WAIT:
            continue
        until = at + directive["seconds"]
        during = sum(1 for t, _ in invocations if at < t < until)
        out.append({"seq": directive["seq"], "seconds": directive["seconds"], "lambda_invocations_during": during})
    # Between a Sleep's entry and its exit, the history holds nothing else.
    entered = [i for i, e in enumerate(events) if e["type"] == "WaitStateEntered"]
    for wait, index in zip(out, entered):
        exited = next((j for j in range(index + 1, len(events)) if events[j]["type"] == "WaitStateExited"), len(events))
        wait["history_events_during"] = exited - index - 1
    return out
