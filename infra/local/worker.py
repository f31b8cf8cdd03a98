"""A Lambda sandbox of the served local stack: one process running invocations, one at a time.

``python -m longstep_kit.local.worker`` reads one JSON request a line on stdin (the handler, its
code directory, the event, the function's environment and role, the stack's virtual now) and
writes one JSON line back (``{"result": ...}`` or ``{"error": {...}}``), warm between invocations
as a Lambda sandbox is. Its AWS calls go to the served moto endpoint over HTTP (the process
environment's ``AWS_ENDPOINT_URL``, set by :mod:`longstep_kit.local.worker_pool`), so the serve
process can kill it for real between a write and its response (``kill.TASK@N``).

IAM is still enforced: before each call the worker asks the serve process (the control route
:data:`CHECK_ROUTE`, with the serve's token) whether the invoking function's role may make it;
the serve process decides with the same policies as for in-process invocations, and a refusal
is raised here as the service's own error.
"""

from __future__ import annotations

import base64
import contextvars
import importlib
import json
import os
import sys
import time
import traceback
import urllib.request
from typing import Any

CHECK_ROUTE = "/_longstep/worker/check"
# The worker process's own variables (its functions' environments are bound per invocation).
ENDPOINT_ENV = "LONGSTEP_WORKER_ENDPOINT"
TOKEN_ENV = "LONGSTEP_WORKER_TOKEN"
BYTES_MARK = "__longstep_bytes__"
_role: contextvars.ContextVar[str | None] = contextvars.ContextVar("longstep_worker_role", default=None)


def jsonable(value: Any) -> Any:
    """``json.dumps``'s ``default``: bytes travel base64-marked (their size counts in the limits)."""
    if isinstance(value, (bytes, bytearray)):
        return {BYTES_MARK: base64.b64encode(bytes(value)).decode()}
    return str(value)


def unjsonable(node: Any) -> Any:
    """The inverse of :func:`jsonable` over a decoded tree."""
    if isinstance(node, dict):
        if set(node) == {BYTES_MARK}:
            return base64.b64decode(node[BYTES_MARK])
        return {k: unjsonable(v) for k, v in node.items()}
    if isinstance(node, list):
        return [unjsonable(v) for v in node]
    return node


class _Context:
    """The Lambda context object's subset the handlers use (as the dispatcher's in-process one)."""

    def __init__(self, request: dict[str, Any]) -> None:
        self.function_name = request["function"]
        self.aws_request_id = request["request_id"]
        self.memory_limit_in_mb = 512
        self._timeout = float(request["timeout_seconds"])
        self._started = time.monotonic()

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:us-east-1:123456789012:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._timeout - (time.monotonic() - self._started)) * 1000))


def _install_checks(endpoint: str, token: str) -> None:
    """Ask the serve process about every AWS call (botocore copies these into each new session)."""
    from botocore import handlers

    from longstep_kit.local.endpoint_guard import TOKEN_HEADER
    from longstep_kit.local.fidelity import _client_error

    def keep(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["longstep_api_params"] = params

    def check(model: Any, context: dict[str, Any], **_: Any) -> None:
        if context.get("longstep_checked"):
            return
        context["longstep_checked"] = True
        question = {
            "role": _role.get(),
            "service": model.service_model.signing_name,
            "operation": model.name,
            "params": context.get("longstep_api_params", {}),
        }
        request = urllib.request.Request(
            endpoint + CHECK_ROUTE,
            data=json.dumps(question, default=jsonable).encode(),
            headers={"Content-Type": "application/json", TOKEN_HEADER: token},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 - the served loopback endpoint
            answer = json.loads(response.read())
        if not answer.get("ok"):
            raise _client_error(model, answer["code"], int(answer["status"]), answer["message"])

    handlers.BUILTIN_HANDLERS.append(("before-parameter-build", keep))
    handlers.BUILTIN_HANDLERS.append(("before-call", check))


def invoke(request: dict[str, Any]) -> dict[str, Any]:
    """Run one invocation; the answer line's content."""
    from longstep import clock, faults
    from longstep.environment import use_environment

    code_dir = request.get("code_dir")
    if code_dir and code_dir not in sys.path:
        sys.path.append(code_dir)
    # The stack's virtual now, moving at ``clock_rate`` (0: still while a handler runs, as the
    # in-process dispatcher's clock is).
    now, rate, began = float(request["now"]), float(request.get("clock_rate", 0.0)), time.monotonic()
    clock.set_source(lambda: now + (time.monotonic() - began) * rate)
    module_name, _, attr = request["handler"].rpartition(".")
    token = _role.set(request.get("role"))
    # The step points it passes (longstep.faults), for the run's counts of what really ran.
    reached: list[list[Any]] = []
    faults.set_hook(lambda point, run_id, turn, call: reached.append([point, run_id, turn, call]))
    try:
        target = getattr(importlib.import_module(module_name), attr)
        with use_environment(request.get("environment", {})):
            return {"result": target(request["event"], _Context(request)), "reached": reached}
    except SystemExit as exc:
        raise SystemExit(exc.code) from None  # the runtime process ends: the dispatcher reports Runtime.ExitError
    except Exception as exc:  # a handler error is the function's error, as in Lambda
        error = {"errorType": type(exc).__name__, "errorMessage": str(exc), "stackTrace": traceback.format_exception(exc)[-5:]}
        return {"error": error, "reached": reached}
    finally:
        faults.set_hook(None)
        _role.reset(token)


def main() -> None:
    """Serve invocations from stdin until it closes."""
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    sys.stdout = sys.stderr  # what handlers print is their log, never the protocol's line
    os.dup2(sys.stderr.fileno(), 1)
    _install_checks(os.environ[ENDPOINT_ENV], os.environ[TOKEN_ENV])
    import boto3  # noqa: F401 - warm: imported before the first invocation, as a sandbox's init does

    import longstep  # noqa: F401

    answers.write(json.dumps({"ready": os.getpid()}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        answer = invoke(unjsonable(json.loads(line)))
        try:
            text = json.dumps(answer)
        except (TypeError, ValueError) as exc:
            text = json.dumps({"error": {"errorType": "Runtime.MarshalError", "errorMessage": f"Unable to marshal response: {exc}"}})
        answers.write(text + "\n")


if __name__ == "__main__":
    main()
