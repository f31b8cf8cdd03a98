"""The runtime's logger: Powertools JSON lines, printed only in Lambda, with secrets masked.

Values marked secret (``mark_secret``) are masked in every line this thread writes until the
next invocation starts (``forget_secrets``).
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from contextvars import ContextVar
from typing import Any

from longstep import environment
from longstep import settings

REDACTED = "[REDACTED]"
# Task tokens are hundreds of characters; masking very short values would mangle whole lines.
_MIN_SECRET_CHARS = 8

_secrets: ContextVar[tuple[str, ...]] = ContextVar("longstep_secrets", default=())
_lock = threading.Lock()
_logger: Any = None


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


def forget_secrets() -> None:
    """Forget the values marked secret (an invocation starts or ends)."""
    _secrets.set(())


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
            write_line(redact(self.format(record)))
        except Exception:  # noqa: BLE001 - logging must not raise into the step
            self.handleError(record)


def write_line(line: str) -> None:
    """Write one line to the current stdout (where the Lambda runtime ships logs and EMF metrics)."""
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
