"""Logs, traces and metrics of one Lambda invocation, with Powertools, loaded lazily.

Every log line carries the run id, the turn and (for a tool call) the call index of the task it
belongs to. Nothing from the event is logged but those routing fields: task tokens and tool
arguments never reach a log line, and values marked secret (``mark_secret``; the handler marks
each task token) are masked in every line as a second guard.

Output goes where the Lambda runtime ships it (stdout, to CloudWatch Logs) only when running in
Lambda. Elsewhere (tests, the local stack, a notebook) the runtime prints nothing: log records
propagate to Python's ``logging`` for the host to route, and metrics are not serialized.

Observability never fails a step: a metric or trace that cannot be written is dropped.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import threading
import time
from contextvars import ContextVar
from typing import Any, Callable, Iterator

from longstep import environment
from longstep import settings

# Metric names (namespace ``settings.METRICS_NAMESPACE``, dimension ``service``); the dashboard in
# src/longstep_kit/constructs/observability.py reads them from here.
MODEL_INPUT_TOKENS = "ModelInputTokens"
MODEL_OUTPUT_TOKENS = "ModelOutputTokens"
TOOL_CALLS = "ToolCalls"  # dimension EFFECT: the tool's effect class
CHECKPOINT_BYTES = "CheckpointBytes"
STEPS_EXECUTED = "StepsExecuted"
STEPS_REPLAYED = "StepsReplayed"
APPROVALS_REQUESTED = "ApprovalsRequested"
ESCALATIONS = "Escalations"
TASK_ERRORS = "TaskErrors"  # dimension CATEGORY: transient (Step Functions retries) | permanent | unexpected
EFFECT = "effect"
CATEGORY = "category"
ERROR_CATEGORIES = ("transient", "permanent", "unexpected")

REDACTED = "[REDACTED]"
# Task tokens are hundreds of characters; masking very short values would mangle whole lines.
_MIN_SECRET_CHARS = 8
_MAX_ID_CHARS = 128
# Result fields worth a log line; anything else (answers, tool output) stays out of the logs.
_RESULT_FIELDS = ("route", "stop", "status", "replayed", "resumed", "next_turn", "tool", "turns")

_secrets: ContextVar[tuple[str, ...]] = ContextVar("longstep_secrets", default=())
_lock = threading.Lock()
_logger: Any = None
_tracer: Any = None
_tracer_loaded = False
_cold_start = True


def in_lambda() -> bool:
    """True inside a Lambda execution environment (the runtime sets the function name)."""
    return bool(environment.get(settings.ENV_LAMBDA_FUNCTION_NAME))


def service_name() -> str:
    """The service name of logs and metrics (``POWERTOOLS_SERVICE_NAME``, else ``longstep``)."""
    return environment.get(settings.ENV_SERVICE_NAME) or settings.SERVICE_NAME


# -- secrets ---------------------------------------------------------------------------------


def mark_secret(value: Any) -> None:
    """Mask ``value`` in every log line this thread writes until the next invocation starts."""
    if isinstance(value, str) and len(value) >= _MIN_SECRET_CHARS:
        _secrets.set(_secrets.get() + (value, json.dumps(value)[1:-1]))


def redact(text: str) -> str:
    """``text`` with every value marked secret (raw or JSON-escaped) replaced by ``[REDACTED]``."""
    for secret in _secrets.get():
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


class _RedactFilter(logging.Filter):
    """Masks secrets in a record's message before any handler, or a propagating parent, sees it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _secrets.get():
            record.msg = redact(record.getMessage())
            record.args = None
        return True


class _LambdaStdoutHandler(logging.Handler):
    """Writes Powertools' JSON lines to the current stdout, in Lambda only, masking secrets."""

    def emit(self, record: logging.LogRecord) -> None:
        if not in_lambda():
            return
        try:
            _write_line(redact(self.format(record)))
        except Exception:  # noqa: BLE001 - logging must not raise into the step
            self.handleError(record)


def _write_line(line: str) -> None:
    # One write per line: concurrent invocations of the local stack must not interleave lines.
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


# -- Powertools, created on first use ----------------------------------------------------------


def logger() -> Any:
    """The process's Powertools Logger (JSON lines; level from ``POWERTOOLS_LOG_LEVEL``, default INFO)."""
    global _logger
    if _logger is None:
        with _lock:
            if _logger is None:
                from aws_lambda_powertools import Logger

                created = Logger(service=service_name(), logger_handler=_LambdaStdoutHandler())
                created.addFilter(_RedactFilter())
                _logger = created
    return _logger


def tracer() -> Any:
    """The Powertools Tracer, or None outside Lambda or when the X-Ray SDK is not installed.

    The layer need not ship the X-Ray SDK: without it, Lambda's active tracing still records each
    invocation, only without Longstep's subsegments and annotations.
    """
    global _tracer, _tracer_loaded
    if not _tracer_loaded:
        with _lock:
            if not _tracer_loaded:
                _tracer = _load_tracer()
                _tracer_loaded = True
    return _tracer


def _load_tracer() -> Any:
    import importlib.util

    if not in_lambda() or importlib.util.find_spec("aws_xray_sdk") is None:
        return None
    try:
        from aws_lambda_powertools import Tracer

        # botocore only: each DynamoDB, S3 and Bedrock call becomes a subsegment.
        return Tracer(service=service_name(), patch_modules=["botocore"])
    except Exception:  # noqa: BLE001 - tracing is optional
        return None


# -- one invocation ----------------------------------------------------------------------------


class Metrics:
    """The metrics of one invocation, written as CloudWatch EMF lines when it ends.

    Each invocation has its own set (Powertools' ``Metrics`` keeps one set per process, which
    concurrent invocations of the local stack would share), serialized with Powertools' EMF
    provider, one line per dimension set.
    """

    def __init__(self) -> None:
        self.points: list[tuple[str, str, float, tuple[tuple[str, str], ...]]] = []

    def add(self, name: str, unit: str, value: float, **dimensions: str) -> None:
        """Record one value of ``name`` (``unit`` is a CloudWatch unit: Count, Bytes...)."""
        self.points.append((name, unit, float(value), tuple(sorted(dimensions.items()))))

    def lines(self, namespace: str, service: str) -> list[str]:
        """The EMF JSON lines of the recorded values."""
        from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import AmazonCloudWatchEMFProvider

        groups: dict[tuple[tuple[str, str], ...], list[tuple[str, str, float]]] = {}
        for name, unit, value, dims in self.points:
            groups.setdefault(dims, []).append((name, unit, value))
        out = []
        for dims, values in groups.items():
            provider = AmazonCloudWatchEMFProvider(namespace=namespace, service=service)
            for key, value in dims:
                provider.add_dimension(name=key, value=value)
            for name, unit, value in values:
                provider.add_metric(name=name, unit=unit, value=value)
            out.append(json.dumps(provider.serialize_metric_set(), separators=(",", ":")))
        return out


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


def error_category(exc: BaseException) -> str:
    """``transient`` (Step Functions retries it), ``permanent`` (a Longstep error) or ``unexpected``."""
    from longstep.errors import LongstepError, TransientError

    if isinstance(exc, TransientError):
        return "transient"
    if isinstance(exc, LongstepError):
        return "permanent"
    return "unexpected"


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
def invocation(task: str, event: Any, context: Any = None) -> Iterator[Invocation]:
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
    _secrets.set(())
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
        with _subsegment(task, keys):
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
        _flush(current.metrics)
        log.thread_safe_clear_keys()
        _secrets.set(())


@contextlib.contextmanager
def _subsegment(task: str, keys: dict[str, Any]) -> Iterator[None]:
    found = tracer()
    if found is None:
        yield
        return
    with contextlib.ExitStack() as stack:
        try:
            segment = stack.enter_context(found.provider.in_subsegment(f"## {task}"))
            for key in ("task", "run_id", "turn", "call"):
                if key in keys:
                    segment.put_annotation(key, keys[key])
        except Exception:  # noqa: BLE001 - a trace that cannot be written is dropped
            pass
        yield


def _flush(metrics: Metrics) -> None:
    if not metrics.points or not in_lambda():
        return
    try:
        namespace = environment.get(settings.ENV_METRICS_NAMESPACE) or settings.METRICS_NAMESPACE
        for line in metrics.lines(namespace, service_name()):
            _write_line(line)
    except Exception as exc:  # noqa: BLE001 - a metric that cannot be written is dropped
        logger().warning("metrics dropped", extra={"error": type(exc).__name__})


def _elapsed_ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0
