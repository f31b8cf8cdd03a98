"""Check a code change against a recorded run before deploying it (as Temporal's replayer does).

``v1`` is the deployed workflow; ``v2_reordered`` swaps two steps, which would break every run
recorded by ``v1``; ``v2_compatible`` only changes what it does with recorded results, which
replays fine. ``longstep.workflows.testing.replay_recorded`` re-runs the new code against the
old log without executing anything.

Run by tests/unit/test_workflow_examples.py.
"""

from __future__ import annotations

from typing import Any

from longstep import StepInfo, Workflow, WorkflowContext


def fetch(args: Any, info: StepInfo) -> dict[str, int]:
    return {"rows": 42}


def load(args: Any, info: StepInfo) -> str:
    return f"loaded {args['rows']} rows"


def v1(ctx: WorkflowContext, request: dict[str, Any]) -> str:
    data = ctx.step(fetch)
    return ctx.step(load, data)


def v2_reordered(ctx: WorkflowContext, request: dict[str, Any]) -> str:
    loaded = ctx.step(load, {"rows": 0})
    ctx.step(fetch)
    return loaded


def v2_compatible(ctx: WorkflowContext, request: dict[str, Any]) -> str:
    data = ctx.step(fetch)
    return ctx.step(load, data).upper()


VERSIONS = {"v1": Workflow(v1), "v2_reordered": Workflow(v2_reordered), "v2_compatible": Workflow(v2_compatible)}
