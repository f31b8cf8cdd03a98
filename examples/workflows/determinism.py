"""Why the replay rules exist, as code: a workflow that breaks them and one that keeps them.

``flaky`` reads the clock itself (``time.time()`` would do the same; here the process clock,
which the in-memory runner moves) to choose its first step. Two hours later the function is
replayed from the top, the clock says something else, the code asks for the other step where
the log recorded the first one, and replay stops with ``NonDeterminismError`` instead of
silently handing one step's result to another. ``steady`` asks the context for the time: the
first reading is recorded and every replay sees it.

Run by tests/unit/test_workflow_examples.py.
"""

from __future__ import annotations

from typing import Any

from longstep import StepInfo, Workflow, WorkflowContext, clock

CUTOFF = 1_800_000_000 + 3600  # one hour after the in-memory runner's clock starts


def morning_report(args: Any, info: StepInfo) -> str:
    return "morning report"


def evening_report(args: Any, info: StepInfo) -> str:
    return "evening report"


def wrap_up(args: Any, info: StepInfo) -> str:
    return f"sent: {args}"


def flaky(ctx: WorkflowContext, request: dict[str, Any]) -> str:
    now = clock.now()  # WRONG: a reading the log does not hold; it differs on replay
    report = ctx.step(morning_report if now < CUTOFF else evening_report)
    ctx.sleep(hours=2)
    return ctx.step(wrap_up, report)


def steady(ctx: WorkflowContext, request: dict[str, Any]) -> str:
    now = ctx.now()  # RIGHT: recorded once, the same on every replay
    report = ctx.step(morning_report if now < CUTOFF else evening_report)
    ctx.sleep(hours=2)
    return ctx.step(wrap_up, report)


def build_flaky() -> Workflow:
    return Workflow(flaky)


def build_steady() -> Workflow:
    return Workflow(steady)
