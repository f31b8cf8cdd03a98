"""A workflow that hands a judgement to an agent: ``ctx.agent`` starts a child agent run, the
workflow waits for its answer holding no compute, and a failed child is a step failure the
workflow can catch.

Run by tests/unit/test_workflow_examples.py with ``longstep.workflows.testing.run_in_memory``,
a stand-in answering for the agent (on a stack, the agent's own run answers).
"""

from __future__ import annotations

from typing import Any

from longstep import StepFailedError, StepInfo, Workflow, WorkflowContext


def collect_failures(args: dict[str, Any], info: StepInfo) -> list[str]:
    """A read: the failing tests of the build."""
    return list(args["failing"])


def incident(ctx: WorkflowContext, request: dict[str, Any]) -> dict[str, Any]:
    failures = ctx.step(collect_failures, {"failing": request.get("failing", [])})
    if not failures:
        return {"verdict": "nothing to look at"}
    try:
        # A child agent run (run id <run_id>-s2): its own checkpoints, tools and approvals.
        answer = ctx.agent("triage", "Do these failures block the release?", failures=failures)
    except StepFailedError as exc:  # the child failed, was aborted or timed out: recorded, replayed
        return {"verdict": "ask a human", "why": exc.message}
    return {"verdict": answer["output"], "child_run": answer["run_id"]}


WORKFLOW = Workflow(incident, description="failures -> the triage agent's verdict")
