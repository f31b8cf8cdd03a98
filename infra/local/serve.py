"""The local stack behind an endpoint: moto's server mode in this process, the handlers in-process.

``LocalStack`` deploys the synthesized template into moto's in-memory backends and routes Lambda
invokes to the real handlers; ``LocalServer`` puts moto's HTTP server in front of the same
backends, so that the ``longstep`` CLI (``--endpoint-url``), the AWS CLI and any AWS SDK in other
shells start executions, list them, decide approvals and send signals exactly as against AWS.

One route is not AWS's: ``/_longstep/clock`` (GET: the stack's virtual now; POST with
``{"seconds": N}``: skip the clock ahead, firing the timers due meanwhile in order). That is how
``longstep local advance 3d`` moves a served stack's time from another shell. AWS has no such
call; it answers only on the local server, to requests carrying the serve's token.

Every request passes the endpoint's door first (``local/endpoint_guard.py``): loopback ``Host``,
no foreign ``Origin``, no cross-site fetch, a SigV4 signature on AWS API requests, the token on
the control routes. A web page in the developer's browser cannot drive the stack.
"""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Callable

from longstep.errors import BadRequestError
from longstep.json_input import parse_json
from longstep_kit.local.endpoint_guard import CLOCK_ROUTE, TOKEN_ENV, TOKEN_HEADER, Door, Guarded, new_token
from longstep_kit.local.stack import LocalStack

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 4566


class ServeError(RuntimeError):
    """The server could not start (the port is taken, for one)."""


def free_port(host: str = DEFAULT_HOST) -> int:
    """A port nothing listens on right now (for tests)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def wait_for_port(host: str, port: int, timeout_seconds: float) -> None:
    """Return once ``host:port`` accepts connections.

    Raises:
        ServeError: it did not within ``timeout_seconds``.
    """
    deadline = time.monotonic() + timeout_seconds
    while True:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise ServeError(f"nothing answers on {host}:{port} after {timeout_seconds:.0f} s") from None
            time.sleep(0.05)


@dataclass
class LocalServer:
    """moto's server in front of a started :class:`LocalStack`.

    Args:
        stack: the local stack (started).
        host: the address to listen on (loopback by default: the AWS API routes need no token, so
            anyone who can reach a non-loopback address can drive the stack).
        port: the port.
        token: the token of the control routes (a fresh one by default).
        isolate_lambdas: run each Lambda invocation in a worker process whose AWS calls come
            here (``local/worker_pool.py``): a worker can be killed mid-write (``kill.TASK@N``).
        clock_rate: with ``isolate_lambdas``, virtual seconds per real second inside an invocation.
    """

    stack: LocalStack
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token: str = field(default_factory=new_token)
    isolate_lambdas: bool = False
    clock_rate: float = 0.0
    _server: Any = None
    _thread: threading.Thread | None = None
    _pool: Any = None
    worker_routes: Any = None  # with isolate_lambdas: the endpoint's side of the workers

    @property
    def endpoint_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout_seconds: float = 30.0) -> None:
        """Listen (moto's backends are the stack's: the server and the handlers share them).

        Raises:
            ServeError: the port is in use, or the server did not come up.
        """
        from moto.server import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
        from werkzeug.serving import make_server

        with socket.socket() as probe:
            if probe.connect_ex((self.host, self.port)) == 0:
                raise ServeError(f"port {self.port} on {self.host} is in use (pass --port)")
        # What moto's ThreadedMotoServer builds, with the clock route in front, behind the door.
        self.door = Door(self.port, self.host, self.token, signed=True)
        inner: Any = DomainDispatcherApplication(create_backend_app)
        if self.isolate_lambdas:
            from longstep_kit.local.worker_pool import WorkerPool
            from longstep_kit.local.worker_routes import WorkerRoutes

            self._pool = WorkerPool(self.endpoint_url, self.token, self.stack.clock, self.clock_rate)
            inner = self.worker_routes = WorkerRoutes(inner, self._pool, self.stack.enforcement if self.stack.enforce else None, self.stack.client)
        from longstep_kit.local.served_runs import RunRoute

        app = Guarded(RunRoute(ClockRoute(inner, self.stack.clock), self.stack), self.door)
        try:
            self._server = make_server(self.host, self.port, app, True, request_handler=MotoRequestHandler)
        except OSError as exc:
            raise ServeError(f"cannot listen on {self.host}:{self.port}: {exc.strerror or exc} (pass --port)") from None
        self._thread = threading.Thread(target=self._server.serve_forever, name="longstep-serve", daemon=True)
        self._thread.start()
        wait_for_port(self.host, self.port, timeout_seconds)
        if self._pool is not None:
            from longstep_kit.local.worker_pool import WorkerError

            try:
                self._pool.start()
            except WorkerError as exc:
                self.stop()
                raise ServeError(str(exc)) from None
            self.stack.dispatcher.isolation = self._pool

    def stop(self) -> None:
        if self._pool is not None:
            self.stack.dispatcher.isolation = None
            self._pool.stop()
            self._pool = None
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None


def wait_until_stopped() -> None:
    """Block until Ctrl-C or SIGTERM: a served stack stops the same way on either.

    SIGTERM is what ``kill``, process managers and CI clean-ups send; raised here as the
    ``KeyboardInterrupt`` Ctrl-C gives, so the caller's one stopping path runs. Call from the main
    thread (Python delivers signals there).
    """

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        threading.Event().wait()
    finally:
        signal.signal(signal.SIGTERM, previous)


class ClockRoute:
    """WSGI middleware: ``/_longstep/clock`` reads or advances the stack's virtual clock; every
    other request goes to moto.

    Args:
        app: moto's WSGI application.
        clock: the stack's :class:`~longstep_kit.local.clock.VirtualClock`.
    """

    def __init__(self, app: Callable[..., Any], clock: Any) -> None:
        self.app, self.clock = app, clock

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if environ.get("PATH_INFO") != CLOCK_ROUTE:
            return self.app(environ, start_response)
        status, body = self._answer(environ)
        data = json.dumps(body).encode()
        start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
        return [data]

    def _answer(self, environ: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        method = environ.get("REQUEST_METHOD", "GET")
        if method == "GET":
            return "200 OK", {"now": self.clock.time()}
        if method != "POST":
            return "405 Method Not Allowed", {"error": f"{method} {CLOCK_ROUTE}: use GET or POST"}
        try:
            size = int(environ.get("CONTENT_LENGTH") or 0)
            seconds = parse_json(environ["wsgi.input"].read(size) or b"{}", "body").get("seconds")
        except (ValueError, AttributeError, BadRequestError):
            return "400 Bad Request", {"error": 'body: expected {"seconds": N}'}
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not 0 <= seconds < float("inf"):
            return "400 Bad Request", {"error": f"seconds: expected a number >= 0, got {seconds!r}"}
        before = self.clock.time()
        self.clock.advance(float(seconds))  # fires the timers due meanwhile, in order
        return "200 OK", {"before": before, "now": self.clock.time()}


def advance_served(endpoint_url: str, seconds: float, token: str, timeout_seconds: float = 300.0) -> dict[str, float]:
    """Skip the virtual clock of the stack served at ``endpoint_url`` ahead by ``seconds``.

    ``token`` is the serve's (printed by ``local serve``, in its ready file).

    Returns:
        ``{"before": ..., "now": ...}``: the stack's virtual time before and after, epoch seconds.

    Raises:
        ServeError: nothing answers there, or it is not a ``longstep local serve`` endpoint.
    """
    request = urllib.request.Request(
        endpoint_url.rstrip("/") + CLOCK_ROUTE,
        data=json.dumps({"seconds": seconds}).encode(),
        headers={"Content-Type": "application/json", TOKEN_HEADER: token},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_seconds) as response:  # noqa: S310 - a local endpoint
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise ServeError(f"{endpoint_url} is not a longstep local serve endpoint (no {CLOCK_ROUTE})") from None
        if exc.code == 403:
            raise ServeError(f"{endpoint_url} refused: the serve's token is missing or wrong (--token, or {TOKEN_ENV})") from None
        detail = exc.read().decode(errors="replace")
        raise ServeError(f"{endpoint_url}: {exc.code}: {detail}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ServeError(f"cannot reach {endpoint_url}: {reason}") from None
    except ValueError:
        raise ServeError(f"{endpoint_url} answered something that is not JSON on {CLOCK_ROUTE}") from None


class RealTime:
    """Moves a virtual clock forward at ``scale`` virtual seconds per real second.

    ``start`` turns the clock's skipping off: only this ticker (and ``local advance``) moves time,
    as a person deciding an approval expects of a 7-day timeout.
    """

    TICK_SECONDS = 0.5

    def __init__(self, clock: Any, scale: float = 1.0, tick_seconds: float = TICK_SECONDS) -> None:
        self.clock, self.scale, self.tick_seconds = clock, scale, tick_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="longstep-real-time", daemon=True)

    def start(self) -> None:
        self.clock.stop()  # no skipping ahead: only the ticker moves time
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(self.tick_seconds):
            now = time.monotonic()  # the real time that passed, however late this tick woke
            self.clock.advance((now - last) * self.scale)
            last = now
