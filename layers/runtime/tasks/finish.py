"""Finish: the run's final answer, recorded, and a summary for the execution's output."""

from __future__ import annotations

from typing import Any

from longstep import clock
from longstep import events, keys, runs_index
from longstep.artifacts import PREVIEW_CHARS
from longstep.child_runs import answer_parent
from longstep.inputs import parse_model
from longstep.contract.cursor import Cursor
from longstep.contract.run import RunRecord
from longstep.messages import text_of
from longstep.contract.steps import FinishOutput
from longstep.runtime import Runtime
from longstep.tasks.common import keep_records, load_run

# Final outputs longer than this are stored in S3 and the execution output keeps a preview.
MAX_INLINE_OUTPUT_CHARS = 32 * 1024


def finish(rt: Runtime, event: Any) -> FinishOutput:
    """Finish: the run's final answer (in S3 when large) and a summary for the execution output."""
    cursor = parse_model(Cursor, event, "finish input")
    run = load_run(rt, cursor.run_id)  # a cursor naming no run is malformed: write no final record for it
    steps = rt.store.steps(cursor.run_id)
    replies = [s for s in steps if s.kind == "model"]
    answer = text_of(replies[-1].result["message"]) if replies else ""
    stopped = event.get("stop") == "stopped"
    output: dict[str, Any] = {
        "run_id": cursor.run_id,
        "status": "STOPPED" if stopped else "SUCCEEDED",
        "turns": len(replies),
        "stop": event.get("stop", "end_turn"),
    }
    if stopped:
        output["stop_reason"] = run.steering.stop_reason or "stopped"
    if len(answer) > MAX_INLINE_OUTPUT_CHARS:
        output["output_ref"] = rt.artifacts.put(answer.encode("utf-8"), "text/plain")
        output["output"] = answer[:PREVIEW_CHARS]
    else:
        output["output"] = answer
    rt.store.put(cursor.run_id, keys.FINAL_RECORD, {"output": output, "finished_at": clock.now()})
    status = runs_index.STOPPED if stopped else runs_index.SUCCEEDED
    runs_index.on_status(rt.store, cursor.run_id, status, error=output.get("stop_reason"), counts=runs_index.token_counts(steps))
    rt.events.emit(
        cursor.run_id, events.RUN_FINISHED, status=output["status"].lower(), turns=output["turns"], stop=output["stop"], output=output["output"]
    )
    close_budget_asks(rt, cursor.run_id, run)
    # A finished run's records are kept ``retention_days`` from its end, not from their writes.
    keep_records(rt, cursor.run_id, run, rt.store.retention_seconds)
    answer_parent(rt, run, output)  # a subagent's run: the parent's call waits for this
    return output


def close_budget_asks(rt: Runtime, run_id: str, run: RunRecord) -> int:
    """An ended run's pending budget ask leaves the approvals inbox (``budget_asks.close_asks``);
    nothing to do for a run without a budget, or where there is no approvals table (the
    in-memory store of unit tests)."""
    if not run.budgets.limits or getattr(rt.store, "client", None) is None or not rt.settings.approvals.table:
        return 0
    from longstep.humans.budget_asks import close_asks

    return close_asks(rt.approvals(), rt.store, run_id)
