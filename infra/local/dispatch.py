"""In-process Lambda: moto's invoke calls the real handler code with the function's environment.

moto (``lambda.use_docker: False``) routes ``Invoke`` to ``LambdaSimpleBackend.invoke``; we
replace that method with a dispatcher that puts the function's code asset on the import path,
imports the function's handler as the Lambda Python runtime would (the generic handlers come from
the installed ``longstep`` package, which the layer ships), and calls it with the event.
"""

from __future__ import annotations

import importlib
import json
import sys
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from longstep.environment import use_environment
from longstep.errors import BadRequestError
from longstep.json_input import parse_json
from longstep_kit.local.iam import acting_as
from longstep_kit.local.limits import lambda_response_error


@dataclass
class Invocation:
    """One Lambda invocation as the dispatcher saw it."""

    function: str
    handler: str
    event: Any
    result: Any = None
    error: dict[str, str] | None = None
    seconds: float = 0.0
    # The function's environment for this invocation; a ``before_invoke`` hook may change it (a
    # test trying another deployed setting: a function version's configuration is immutable).
    environment: dict[str, str] = field(default_factory=dict)
    # Run in a worker process (``local/worker_pool.py``): its pid, and its return code if it died in it.
    pid: int | None = None
    exit_code: int | None = None
    # The step points (longstep.faults) it passed there: (point, run_id, turn, call) each.
    reached: list[tuple[str, str, int, int | None]] = field(default_factory=list)

    @property
    def task(self) -> str:
        """The handler's module name: ``model_turn`` for ``longstep_functions.model_turn.lambda_handler``."""
        return self.handler.rsplit(".", 2)[-2] if self.handler.count(".") >= 1 else self.handler


class Crash(BaseException):
    """Raised by a fault hook to kill an invocation the way a crash or timeout would."""


@dataclass
class LambdaContext:
    """The subset of the Lambda context object that handlers and Powertools use."""

    function_name: str
    timeout_seconds: int
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    memory_limit_in_mb: int = 512
    started: float = field(default_factory=time.monotonic)

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:us-east-1:123456789012:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.timeout_seconds - (time.monotonic() - self.started)) * 1000))


Hook = Callable[[Invocation], None]


class Dispatcher:
    """Routes moto's Lambda invokes to the real handlers and records every invocation.

    Attributes:
        code_dirs: the S3 key of each code asset (as the template names it) -> its directory.
    """

    def __init__(self) -> None:
        self.code_dirs: dict[str, Path] = {}
        self.invocations: list[Invocation] = []
        self.before_invoke: list[Hook] = []  # called as an invocation starts (benches time them)
        self.after_invoke: list[Hook] = []
        self._lock = threading.Lock()
        self.enforce_limits = False  # Lambda's 6 MB response limit (set by the local stack's enforcement)
        # Variables whose deployed value names something the local stack stands in for (the
        # approval API's URL -> the local pages server): replaced in every function environment
        # that defines them. Function versions are immutable, so the configuration cannot change.
        self.stand_ins: dict[str, str] = {}
        # The worker processes invocations run in (``local/worker_pool.py``); None: in this process.
        self.isolation: Any = None
        # Called first in every invocation: a served stack's hot reload (``local/reload.py``).
        self.reload: Callable[[], None] | None = None

    def install(self) -> None:
        """Route moto's Lambda invokes here (undone with every moto patch by ``moto_patches.undo_all``)."""
        from longstep_kit.local import moto_patches

        moto_patches.route_lambda(self.invoke)

    def invoke(self, fn: Any, body: Any, response_headers: dict[str, str]) -> bytes:
        """Call the handler of moto function ``fn`` with ``body``; report errors as Lambda does."""
        if self.reload is not None:
            self.reload()
        handler = fn.handler
        code_dir = self.code_dirs.get((fn.code or {}).get("S3Key", ""))
        if code_dir is not None and str(code_dir) not in sys.path:
            sys.path.append(str(code_dir))
        module_name, _, attr = handler.rpartition(".")
        try:
            # Depth-capped: a payload nested thousands deep raised RecursionError out of moto's invoke.
            event = parse_json(body, "Payload") if body else {}
        except BadRequestError as exc:
            # Lambda's runtime answers an event it cannot read with Runtime.UnmarshalError.
            response_headers["x-amz-function-error"] = "Unhandled"
            return json.dumps({"errorType": "Runtime.UnmarshalError", "errorMessage": str(exc)}).encode()
        variables = {k: str(v) for k, v in (fn.environment_vars or {}).items()}
        variables.update({k: v for k, v in self.stand_ins.items() if k in variables})
        record = Invocation(function=fn.function_name, handler=handler, event=event, environment=variables)
        context = LambdaContext(function_name=fn.function_name, timeout_seconds=int(fn.timeout or 3))
        for hook in list(self.before_invoke):
            hook(record)
        started = time.perf_counter()
        if self.isolation is not None:
            self._run_isolated(record, fn, code_dir, context)
            return self._finish(record, started, response_headers)
        try:
            target = getattr(importlib.import_module(module_name), attr)
            # The function's own environment, for this invocation only: nothing is written to
            # os.environ, so concurrent invocations (a Map's tool calls) never see each other's.
            # ...and its role: the AWS calls it makes are checked against that role's policies.
            with use_environment(record.environment), acting_as(fn.role):
                record.result = target(event, context)
            payload = json.dumps(record.result)
            if self.enforce_limits:
                record.error = lambda_response_error(payload.encode())
        except Crash as exc:
            record.error = {"errorType": "Runtime.ExitError", "errorMessage": f"injected crash: {exc}"}
        except SystemExit as exc:
            # A handler that exits ends its runtime process: Lambda reports Runtime.ExitError
            # ("Runtime exited with error: exit status 1",
            # https://github.com/aws/aws-lambda-python-runtime-interface-client/issues/10). It
            # escaped the dispatcher before and killed the engine's thread (its wait never ended).
            record.error = {"errorType": "Runtime.ExitError", "errorMessage": f"Runtime exited with error: exit status {exc.code}"}
        except Exception as exc:  # a handler error is the function's error, as in Lambda
            record.error = {
                "errorType": type(exc).__name__,
                "errorMessage": str(exc),
                "stackTrace": traceback.format_exception(exc)[-5:],
            }
        return self._finish(record, started, response_headers, payload if record.error is None else "")

    def _run_isolated(self, record: Invocation, fn: Any, code_dir: Path | None, context: LambdaContext) -> None:
        """Run the invocation in a worker process; a worker that died is a Runtime.ExitError."""
        answer = self.isolation.run(record, None if code_dir is None else str(code_dir), fn.role, context.timeout_seconds, context.aws_request_id)
        record.result, record.error = answer.get("result"), answer.get("error")
        record.reached = [tuple(point) for point in answer.get("reached", [])]
        if record.error is None and self.enforce_limits:
            record.error = lambda_response_error(json.dumps(record.result).encode())

    def _finish(self, record: Invocation, started: float, response_headers: dict[str, str], payload: str | None = None) -> bytes:
        record.seconds = time.perf_counter() - started
        with self._lock:
            self.invocations.append(record)
        for hook in list(self.after_invoke):
            hook(record)
        if record.error is not None:
            response_headers["x-amz-function-error"] = "Unhandled"
            return json.dumps(record.error).encode()
        return (json.dumps(record.result) if payload is None else payload).encode()
