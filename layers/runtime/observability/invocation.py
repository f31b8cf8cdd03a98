"""One observed invocation: keys on every log line, a subsegment, metrics, one closing log line."""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any, Callable, Iterator

from longstep.observability.logs import forget_secrets, logger, mark_secret, redact
from longstep.observability.metrics import (
    APPROVALS_REQUESTED,
    CATEGORY,
    CHECKPOINT_BYTES,
    EFFECT,
    ESCALATIONS,
    MODEL_INPUT_TOKENS,
    MODEL_OUTPUT_TOKENS,
    STEPS_EXECUTED,
    STEPS_REPLAYED,
    TASK_ERRORS,
    TOOL_CALLS,
    Metrics,
    error_category,
    flush,
)
from longstep.observability.tracing import subsegment

_MAX_ID_CHARS = 128
# Result fields worth a log line; anything else (answers, tool output) stays out of the logs.
_RESULT_FIELDS = ("route", "stop", "status", "replayed", "resumed", "next_turn", "tool", "turns")
_cold_start = True


class _ObservedStore:
    """The checkpoint store, counting what is written: bytes, executed steps, model tokens.

    Every other attribute is the wrapped store's.
    """

    def __init__(self, inner: Any, invocation: "Invocation") -> None:
        self._inner = inner
        self._invocation = invocation

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def put_once(self, run_id: str, sk: str, attrs: dict[str, Any]) -> None:
        self._inner.put_once(run_id, sk, attrs)
        self._invocation.wrote(attrs)

    def put(self, run_id: str, sk: str, attrs: dict[str, Any]) -> None:
        self._inner.put(run_id, sk, attrs)
        self._invocation.wrote(attrs)

    def record_step(self, run_id: str, sk: str, kind: str, name: str, result: Any) -> None:
        self._inner.record_step(run_id, sk, kind, name, result)
        self._invocation.recorded(kind, name, result)

    def complete_step(self, run_id: str, sk: str, kind: str, name: str, result: Any, attempt: str) -> bool:
        """The result written into this attempt's claim (``longstep.claims``): counted only when it
        landed (a zombie's refused write executed nothing the metrics should count twice)."""
        done = self._inner.complete_step(run_id, sk, kind, name, result, attempt)
        if done:
            self._invocation.recorded(kind, name, result)
        return done


class Invocation:
    """What the handler tells observability about one invocation of a loop task.

    Attributes:
        task: the loop function's name (``model_turn``, ``call_tool``...).
        metrics: the invocation's metrics.
    """

    def __init__(self, task: str) -> None:
        self.task = task
        self.metrics = Metrics()
        self.result_fields: dict[str, Any] = {}
        self._agents: list[Any] = []
        self._tools: list[str] = []

    def watch_store(self, store: Any) -> Any:
        """``store``, wrapped so that its writes are counted."""
        return _ObservedStore(store, self)

    def watch_agents(self, resolve: Callable[[str], Any]) -> Callable[[str], Any]:
        """``resolve``, remembering the agents it returns (their tools' effect classes)."""

        def resolve_and_remember(name: str) -> Any:
            agent = resolve(name)
            self._agents.append(agent)
            return agent

        return resolve_and_remember

    def wrote(self, attrs: dict[str, Any]) -> None:
        self.metrics.add(CHECKPOINT_BYTES, "Bytes", len(json.dumps(attrs, default=str)))

    def recorded(self, kind: str, name: str, result: Any) -> None:
        self.metrics.add(CHECKPOINT_BYTES, "Bytes", len(json.dumps(result, default=str)))
        self.metrics.add(STEPS_EXECUTED, "Count", 1)
        if kind == "model" and isinstance(result, dict):
            usage = result.get("usage") or {}
            self.metrics.add(MODEL_INPUT_TOKENS, "Count", _number(usage.get("inputTokens")))
            self.metrics.add(MODEL_OUTPUT_TOKENS, "Count", _number(usage.get("outputTokens")))
        elif kind == "tool":
            self._tools.append(name)

    def finished(self, result: Any) -> Any:
        """Count what the task's result says (replays, approvals, escalations); returns ``result``."""
        for name in self._tools:
            self.metrics.add(TOOL_CALLS, "Count", 1, **{EFFECT: self._effect_of(name)})
        if not isinstance(result, dict):
            return result
        self.result_fields = {k: result[k] for k in _RESULT_FIELDS if isinstance(result.get(k), (str, int, float, bool))}
        if result.get("replayed") is True:
            self.metrics.add(STEPS_REPLAYED, "Count", 1)
        if result.get("status") == "pending":
            if self.task == "request_approval":
                self.metrics.add(APPROVALS_REQUESTED, "Count", 1)
            elif self.task == "escalate":
                self.metrics.add(ESCALATIONS, "Count", 1)
        return result

    def failed(self, exc: BaseException) -> str:
        """Count a failure; returns its category."""
        category = error_category(exc)
        self.metrics.add(TASK_ERRORS, "Count", 1, **{CATEGORY: category})
        return category

    def _effect_of(self, tool: str) -> str:
        for agent in self._agents:
            found = getattr(getattr(agent, "tools", None), "tools", {}).get(tool)
            if found is not None:
                return str(getattr(found.effect, "value", found.effect))
        return "unknown"


def routing_keys(event: Any) -> dict[str, Any]:
    """The run id, turn and call an event names, read defensively (the event may be malformed).

    Task-token tasks wrap the cursor under ``item``; nothing else of the event is read.

    Args:
        event: a loop task's event, as received.

    Returns:
        ``run_id`` (a string, truncated), ``turn`` and ``call`` (integers), each when present.
    """
    source = event if isinstance(event, dict) else {}
    if isinstance(source.get("item"), dict):
        source = source["item"]
    keys: dict[str, Any] = {}
    if isinstance(source.get("run_id"), str):
        keys["run_id"] = source["run_id"][:_MAX_ID_CHARS]
    for name, field in (("turn", "turn"), ("turn", "next_turn"), ("call", "call")):
        value = source.get(field)
        if name not in keys and isinstance(value, int) and not isinstance(value, bool):
            keys[name] = value
    return keys


@contextlib.contextmanager
def observe(task: str, event: Any, context: Any = None) -> Iterator[Invocation]:
    """Observe one invocation of loop task ``task``: keys on every log line, a subsegment, metrics.

    The caller hands the task's result to ``Invocation.finished``. One line is logged when the
    task ends (INFO on success, WARNING for a Longstep error, ERROR for any other exception) and
    the invocation's metrics are written; exceptions propagate unchanged.

    Args:
        task: the loop function's name.
        event: the invocation's event; only its routing fields are read, and its task token is
            marked secret.
        context: the Lambda context (for the request id), or None.

    Yields:
        The invocation, for the handler to wrap its store and agent resolver and report the result.
    """
    global _cold_start
    log = logger()
    log.thread_safe_clear_keys()  # a warm container's previous invocation may have left keys
    forget_secrets()
    if isinstance(event, dict):
        mark_secret(event.get("token"))
    cold, _cold_start = _cold_start, False
    keys = {"task": task, **routing_keys(event), "cold_start": cold}
    request_id = getattr(context, "aws_request_id", None)
    if isinstance(request_id, str):
        keys["function_request_id"] = request_id
    log.thread_safe_append_keys(**keys)
    current = Invocation(task)
    started = time.perf_counter()
    try:
        with subsegment(task, keys):
            yield current
    except BaseException as exc:
        category = current.failed(exc)
        (log.error if category == "unexpected" else log.warning)(
            "task failed",
            extra={
                "error": type(exc).__name__,
                "error_message": redact(str(exc))[:2000],
                "category": category,
                "duration_ms": _elapsed_ms(started),
            },
        )
        raise
    else:
        log.info("task finished", extra={"duration_ms": _elapsed_ms(started), **current.result_fields})
    finally:
        flush(current.metrics)
        log.thread_safe_clear_keys()
        forget_secrets()


def _elapsed_ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0
