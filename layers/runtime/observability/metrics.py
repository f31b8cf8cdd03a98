"""The runtime's metrics: the names the dashboard reads, and one invocation's values as EMF lines."""

from __future__ import annotations

import json

from longstep import environment
from longstep import settings
from longstep.observability.logs import in_lambda, logger, service_name, write_line

# Metric names (namespace ``settings.METRICS_NAMESPACE``, dimension ``service``); the dashboard in
# infra/constructs/observability.py reads them from here.
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


def error_category(exc: BaseException) -> str:
    """``transient`` (Step Functions retries it), ``permanent`` (a Longstep error) or ``unexpected``."""
    from longstep.errors import LongstepError, TransientError

    if isinstance(exc, TransientError):
        return "transient"
    if isinstance(exc, LongstepError):
        return "permanent"
    return "unexpected"


def flush(metrics: Metrics) -> None:
    """Write ``metrics`` as EMF lines to stdout, in Lambda only; a metric that cannot be written is dropped."""
    if not metrics.points or not in_lambda():
        return
    try:
        namespace = environment.get(settings.ENV_METRICS_NAMESPACE) or settings.METRICS_NAMESPACE
        for line in metrics.lines(namespace, service_name()):
            write_line(line)
    except Exception as exc:  # noqa: BLE001 - a metric that cannot be written is dropped
        logger().warning("metrics dropped", extra={"error": type(exc).__name__})
