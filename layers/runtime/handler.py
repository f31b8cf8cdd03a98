"""Glue between a Lambda entry point (``longstep_functions``) and a task (``longstep.tasks``): build
the runtime once per invocation, and append what the invocation emitted to its runs' event streams."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from longstep import events
from longstep.errors import InvalidInputError
from longstep.observability.invocation import observe
from longstep.runtime import AgentResolver, Runtime

# A task: ``(runtime, In) -> Out``, given its input's JSON (``longstep.contract.steps``).
TaskFn = Callable[[Runtime, Any], Mapping[str, Any]]


def handle(step: TaskFn, event: Any, context: Any, resolve_agent: AgentResolver) -> Mapping[str, Any]:
    """Run ``step`` for one invocation with clients reused from earlier warm invocations.

    The invocation is observed (``longstep.observability.invocation.observe``): its log lines carry the run id and
    turn, and the checkpoint writes and agent lookups are counted for its metrics. Its events are
    appended when it ends, however it ends: a failed attempt's events are what a follower saw of it,
    and the next attempt of the step supersedes them (``longstep.events``).
    """
    with observe(step.__name__, event, context) as observed:
        rt = Runtime.from_env(observed.watch_agents(resolve_agent), context)
        rt.store = observed.watch_store(rt.store)
        rt.events = events.Emitter(events.EventLog(rt.store), attempt=str(getattr(context, "aws_request_id", "") or ""))
        try:
            return observed.finished(step(rt, event))
        except InvalidInputError:
            raise  # the caller's mistake, not something the run did: nothing to tell its followers
        except Exception as exc:
            run_id = event.get("run_id") if isinstance(event, dict) else None
            if isinstance(run_id, str) and run_id:
                rt.events.emit(run_id, events.STEP_FAILED, task=step.__name__, error=type(exc).__name__, message=str(exc)[:500])
            raise
        finally:
            rt.events.flush()
