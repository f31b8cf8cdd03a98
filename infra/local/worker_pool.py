"""Process-isolated Lambda for the served local stack: each invocation runs in a worker process.

By default the dispatcher calls a handler in a thread of the serve process; a crash there can
only be simulated. With isolation (``longstep local serve --isolate-lambdas``, and whenever a
``kill.TASK@N`` fault is planned) each invocation is sent to a warm worker process
(:mod:`longstep_kit.local.worker`) whose AWS calls reach the served endpoint over HTTP, and a
worker can die for real, as a Lambda sandbox does (out of memory, a timeout, a host lost).

A worker that dies in an invocation is reported as Lambda reports a runtime process that exits:
``Runtime.ExitError`` with "Error: Runtime exited with error: signal: killed" for a SIGKILL
(https://docs.aws.amazon.com/lambda/latest/dg/troubleshooting-invocation.html,
https://repost.aws/knowledge-center/lambda-runtime-error), so the state machine's Retry runs
the task again; the dead worker is replaced by a fresh one.
"""

from __future__ import annotations

import itertools
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from longstep_kit.local.worker import ENDPOINT_ENV, TOKEN_ENV, jsonable

# A worker's AWS access key names it to the serve process (moto takes any key as its account's).
KEY_PREFIX = "LSWORKER"
# How long past its function's timeout a worker may take: the machine may be loaded, and the
# local stack does not model Lambda's timeout (docs/local-fidelity.md).
TIMEOUT_MARGIN_SECONDS = 120.0
START_TIMEOUT_SECONDS = 120.0
# Go's names for the signals (the Lambda runtime's message is Go's os.ProcessState text).
_SIGNAL_NAMES = {signal.SIGKILL: "killed", signal.SIGTERM: "terminated", signal.SIGSEGV: "segmentation fault", signal.SIGABRT: "aborted"}


class WorkerError(RuntimeError):
    """A worker did not start, or broke its protocol."""


def exit_error(returncode: int, request_id: str) -> dict[str, str]:
    """The error Lambda reports for a runtime process that ended with ``returncode`` mid-invocation."""
    if returncode < 0:
        try:
            number = signal.Signals(-returncode)
            reason = f"signal: {_SIGNAL_NAMES.get(number, number.name.lower())}"
        except ValueError:  # a signal Python has no name for
            reason = f"signal {-returncode}"
    else:
        reason = f"exit status {returncode}"
    return {"errorType": "Runtime.ExitError", "errorMessage": f"RequestId: {request_id} Error: Runtime exited with error: {reason}"}


@dataclass(eq=False)
class Worker:
    """One worker process and what it runs now."""

    proc: subprocess.Popen
    access_key: str
    log: Any
    invocation: Any = None  # the dispatcher's Invocation it runs (None: idle)
    generation: int = 0  # the pool's generation it was started in (a code reload starts a new one)
    writes: list[bytes] = field(default_factory=list)  # this invocation's DynamoDB write requests (bodies)

    @property
    def pid(self) -> int:
        return self.proc.pid


class WorkerPool:
    """Warm worker processes for the dispatcher, talking to the stack served at ``endpoint_url``.

    Args:
        endpoint_url: the served moto endpoint (loopback).
        token: the serve's control token (the workers' IAM questions need it).
        clock: the stack's virtual clock (each invocation starts at its now).
        clock_rate: virtual seconds per real second inside an invocation (0: time stands still
            while a handler runs, as in-process; a served stack in real time passes its scale).
    """

    def __init__(self, endpoint_url: str, token: str, clock: Any, clock_rate: float = 0.0) -> None:
        self.endpoint_url, self.token, self.clock, self.clock_rate = endpoint_url, token, clock, clock_rate
        self._idle: list[Worker] = []
        self._busy: dict[str, Worker] = {}  # access key -> the worker running an invocation
        self._all: list[Worker] = []
        self._guard = threading.Lock()
        self._keys = itertools.count(1)
        # Called by the served endpoint for each request of a busy worker: (worker, operation,
        # its table or path) -> kill the worker once the request is carried out?
        self.on_write: Callable[[Worker, str, str], bool] | None = None
        self.generation = 0

    def recycle(self) -> None:
        """Start a new generation: the project's code changed (``local/reload.py``), and a worker
        keeps the modules it imported. Idle workers end now, busy ones when their invocation does."""
        with self._guard:
            self.generation += 1
            stale, self._idle = self._idle, []
        for worker in stale:
            worker.proc.kill()
            self._retire(worker)

    def start(self, warm: int = 1) -> None:
        """Start ``warm`` workers now (the first invocation does not wait for an interpreter)."""
        workers = [self._spawn() for _ in range(warm)]
        for worker in workers:
            self._await_ready(worker)
        with self._guard:
            self._idle.extend(workers)

    def stop(self) -> None:
        with self._guard:
            workers, self._idle, self._all = list(self._all), [], []
        for worker in workers:
            if worker.proc.poll() is None:
                worker.proc.kill()
            worker.proc.wait(timeout=10)
            for stream in (worker.proc.stdin, worker.proc.stdout):
                stream.close()
            worker.log.close()

    def busy_worker(self, access_key: str) -> Worker | None:
        """The worker running an invocation under ``access_key`` (the served endpoint's lookup)."""
        with self._guard:
            return self._busy.get(access_key)

    def run(self, invocation: Any, code_dir: str | None, role: str | None, timeout_seconds: int, request_id: str) -> dict[str, Any]:
        """Run ``invocation`` in a worker: ``{"result": ...}`` or ``{"error": ...}`` (a dead worker's included)."""
        worker = self._acquire()
        request = {
            "handler": invocation.handler,
            "code_dir": code_dir,
            "event": invocation.event,
            "environment": invocation.environment,
            "function": invocation.function,
            "role": role,
            "timeout_seconds": timeout_seconds,
            "request_id": request_id,
            "now": self.clock.time(),
            "clock_rate": self.clock_rate,
        }
        with self._guard:
            worker.invocation, worker.writes = invocation, []
            self._busy[worker.access_key] = worker
        invocation.pid = worker.pid
        try:
            worker.proc.stdin.write((json.dumps(request, default=jsonable) + "\n").encode())
            worker.proc.stdin.flush()
            line = _read_line(worker.proc.stdout, time.monotonic() + timeout_seconds + TIMEOUT_MARGIN_SECONDS)
        except BrokenPipeError:
            line = b""
        with self._guard:
            self._busy.pop(worker.access_key, None)
            worker.invocation = None
        if line is None:  # still running past its timeout: Lambda ends the sandbox
            worker.proc.kill()
            self._retire(worker)
            invocation.exit_code = worker.proc.returncode
            return {
                "error": {
                    "errorType": "Sandbox.Timedout",
                    "errorMessage": f"RequestId: {request_id} Error: Task timed out after {timeout_seconds} seconds",
                }
            }
        if not line:  # the process ended mid-invocation
            self._retire(worker)
            invocation.exit_code = worker.proc.returncode
            return {"error": exit_error(worker.proc.returncode, request_id)}
        with self._guard:
            current = worker.generation == self.generation
            if current:
                self._idle.append(worker)
        if not current:  # started before a code reload: it may hold the old modules
            worker.proc.kill()
            self._retire(worker)
        return json.loads(line)

    def _acquire(self) -> Worker:
        with self._guard:
            while self._idle:
                worker = self._idle.pop()
                if worker.proc.poll() is None:
                    return worker
        worker = self._spawn()
        self._await_ready(worker)
        return worker

    def _retire(self, worker: Worker) -> None:
        try:
            worker.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.proc.kill()
            worker.proc.wait(timeout=30)

    def _spawn(self) -> Worker:
        key = f"{KEY_PREFIX}{next(self._keys):04d}"
        env = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
        env.update(
            {
                "AWS_ENDPOINT_URL": self.endpoint_url,
                "AWS_ACCESS_KEY_ID": key,
                "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_REGION": "us-east-1",
                ENDPOINT_ENV: self.endpoint_url,
                TOKEN_ENV: self.token,
            }
        )
        log = tempfile.TemporaryFile()  # the worker's log (its handlers' lines): shown if it fails to start
        proc = subprocess.Popen(
            [sys.executable, "-m", "longstep_kit.local.worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env, close_fds=True
        )
        worker = Worker(proc=proc, access_key=key, log=log, generation=self.generation)
        with self._guard:
            self._all.append(worker)
        return worker

    def _await_ready(self, worker: Worker) -> None:
        line = _read_line(worker.proc.stdout, time.monotonic() + START_TIMEOUT_SECONDS)
        if not line or "ready" not in json.loads(line):
            worker.proc.kill()
            worker.proc.wait(timeout=10)
            worker.log.seek(0)
            tail = worker.log.read().decode(errors="replace").strip().splitlines()[-5:]
            raise WorkerError(f"a Lambda worker did not start (exit {worker.proc.returncode}): {' | '.join(tail)}")


def _read_line(stream: Any, deadline: float) -> bytes | None:
    """One line from a worker's pipe: b"" at its end, None if nothing came by ``deadline``."""
    fd, data = stream.fileno(), bytearray()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], min(left, 1.0))
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            return b""
        data += chunk
        if data.endswith(b"\n"):
            return bytes(data)
