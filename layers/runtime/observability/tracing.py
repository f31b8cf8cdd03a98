"""The X-Ray tracer (Powertools), when there is one, and the subsegment of one task."""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

from longstep.observability.logs import in_lambda, service_name

_lock = threading.Lock()
_tracer: Any = None
_tracer_loaded = False


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


@contextlib.contextmanager
def subsegment(task: str, keys: dict[str, Any]) -> Iterator[None]:
    """A subsegment ``## <task>`` annotated with the task's routing keys; nothing without a tracer."""
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
