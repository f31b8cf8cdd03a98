"""Glue between a Lambda handler and a loop function: build the runtime once per invocation."""

from __future__ import annotations

from typing import Any, Callable

from longstep.runtime import AgentResolver, Runtime

LoopFn = Callable[[Runtime, Any], dict[str, Any]]


def handle(step: LoopFn, event: Any, context: Any, resolve_agent: AgentResolver) -> dict[str, Any]:
    """Run ``step`` for one invocation with clients reused from earlier warm invocations."""
    return step(Runtime.from_env(resolve_agent, context), event)
