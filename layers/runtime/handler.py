"""Glue between a Lambda handler and a task (``longstep.tasks``): build the runtime once per invocation."""

from __future__ import annotations

from typing import Any, Callable

from longstep.observability.invocation import observe
from longstep.runtime import AgentResolver, Runtime

TaskFn = Callable[[Runtime, Any], dict[str, Any]]


def handle(step: TaskFn, event: Any, context: Any, resolve_agent: AgentResolver) -> dict[str, Any]:
    """Run ``step`` for one invocation with clients reused from earlier warm invocations.

    The invocation is observed (``longstep.observability.invocation.observe``): its log lines carry the run id and
    turn, and the checkpoint writes and agent lookups are counted for its metrics.
    """
    with observe(step.__name__, event, context) as observed:
        rt = Runtime.from_env(observed.watch_agents(resolve_agent), context)
        rt.store = observed.watch_store(rt.store)
        return observed.finished(step(rt, event))
