"""The run UI's HTTP server: the standard library's, one thread per request, on 127.0.0.1.

Routes (every one behind ``ui/guard.py``'s checks):

| method and path | answers |
|---|---|
| ``GET /?token=T`` | the printed link: the token becomes a cookie, 303 to ``/`` |
| ``GET /``, ``GET /static/ui.js``, ``/static/ui.css`` | the page |
| ``GET /api/runs?q=&agent=&status=&age=&parent=`` | ``{"runs": [...]}`` |
| ``GET /api/runs/{id}`` | where the run stands, its children |
| ``GET /api/runs/{id}/cost`` | its usage and cost estimate |
| ``GET /api/runs/{id}/events`` | Server-Sent Events: the run's events after ``Last-Event-ID`` (or ``?after=``), live until its latest execution ends, then ``event: end`` |
| ``GET /api/runs/{id}/approvals`` | ``{"approvals": [...]}``: its pending requests |
| ``POST /api/runs/{id}/send`` ``{"text"}``, ``/pause``, ``/resume``, ``/stop`` ``{"reason"?}`` | steering |
| ``POST /api/approvals/{id}/decision`` ``{"decision": "approve"\\|"reject", "reason"?}`` | the decided request |

Errors are ``{"error": "<one line>"}`` with 400, 401, 403, 404, 409 or 410 (500 for a fault,
logged in one line). No answer carries an ``Access-Control-*`` header.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from longstep.errors import LongstepError
from longstep_kit.ops import live
from longstep_kit.ui.assets import SECURITY_HEADERS, asset
from longstep_kit.ui.backend import ApiError, Backend, RunFilter, api_error
from longstep_kit.ui.guard import TOKEN_QUERY, Guard, is_loopback, new_token

MAX_BODY_BYTES = 64 * 1024
KEEPALIVE_SECONDS = 15.0  # an SSE comment this often: a follower whose browser left is noticed
_STEERING = ("send", "pause", "resume", "stop")


class UiBindError(LongstepError):
    """The UI was asked to listen where it may not (another address than loopback, unallowed)."""


def check_bind(host: str, allow_remote: bool) -> None:
    """Raises UiBindError for a non-loopback ``host`` unless ``allow_remote``."""
    if not is_loopback(host) and not allow_remote:
        raise UiBindError(f"--host {host}: the run UI listens on loopback only (127.0.0.1); --allow-remote lets it listen on {host}")


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = False


class _HTTPServer6(_HTTPServer):
    address_family = socket.AF_INET6


class UiServer:
    """The run UI, served in a thread (``start``) or in the caller's (``serve_forever``).

    Args:
        backend: what the routes do.
        host: the address to listen on: loopback only, unless ``allow_remote``.
        port: the port (0: a free one).
        allow_remote: listen on a non-loopback address (anyone who can reach it and has the
            token acts with the operator's AWS credentials).
        token: the serve's token (default: a new random one).
        log: where one-line errors go (default: nowhere).
        poll_seconds: how often a follower reads a run's event log.
    """

    def __init__(
        self,
        backend: Backend,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        allow_remote: bool = False,
        token: str | None = None,
        log: Callable[[str], None] | None = None,
        poll_seconds: float = live.POLL_SECONDS,
    ) -> None:
        check_bind(host, allow_remote)
        self.backend = backend
        self.host = host
        self.log = log or (lambda line: None)
        self.poll_seconds = poll_seconds
        self.stopping = threading.Event()
        server_class = _HTTPServer6 if ":" in host else _HTTPServer
        try:
            self.httpd = server_class((host.strip("[]"), port), _handler(self))
        except OSError as exc:
            raise UiBindError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        self.port = int(self.httpd.server_address[1])
        shown = f"[{host.strip('[]')}]" if ":" in host else host
        self.guard = Guard(token or new_token(), self.port, () if is_loopback(host) else (shown,))
        self.base = f"http://{'127.0.0.1' if is_loopback(host) and ':' not in host else shown}:{self.port}/"
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The link to open: it carries the token (once; the page then holds it as a cookie)."""
        return f"{self.base}?{TOKEN_QUERY}={self.guard.token}"

    def start(self) -> "UiServer":
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1}, name="longstep-ui", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        try:
            self.httpd.serve_forever(poll_interval=0.2)
        finally:
            self.close()

    def close(self) -> None:
        """Stop serving: open event streams end at their next poll."""
        self.stopping.set()
        if self._thread is not None:
            self.httpd.shutdown()
            self._thread.join(10)
            self._thread = None
        self.httpd.server_close()

    def __enter__(self) -> "UiServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _handler(ui: UiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        server_ui = ui

    return Handler


class _Handler(BaseHTTPRequestHandler):
    server_ui: UiServer
    server_version = "longstep-ui"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass  # no access log: the operator's terminal shows the link and errors only

    # dispatch ---------------------------------------------------------------------------------

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch(self.command)  # checked like the rest, then 405: no CORS preflight is ever granted

    do_DELETE = do_PATCH = do_OPTIONS = do_PUT

    def _dispatch(self, method: str) -> None:
        ui = self.server_ui
        parsed = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(parsed.query)
        refused = ui.guard.origin_refusal(method, self.headers)
        if refused is None and method == "GET" and parsed.path == "/" and TOKEN_QUERY in query:
            if ui.guard.valid(query[TOKEN_QUERY][0]):  # the printed link: trade the token for a cookie
                self._send(303, b"", "text/plain", {"Location": "/", "Set-Cookie": ui.guard.set_cookie()})
                return
        if refused is None:
            refused = ui.guard.check(method, self.headers)
        if refused is not None:
            self._json(refused.status, {"error": refused.message})
            return
        try:
            self._route(method, parsed.path, query)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the browser went away
        except Exception as exc:  # noqa: BLE001 - one line to the caller and the log, never a traceback
            answer = api_error(exc)
            if answer is None:
                ui.log(f"ui: {method} {parsed.path}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
                answer = ApiError(500, f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:300]}")
            self._json(answer.status, {"error": str(answer).splitlines()[0] if str(answer) else "error"})

    def _route(self, method: str, path: str, query: dict[str, list[str]]) -> None:
        backend = self.server_ui.backend
        if method not in ("GET", "POST"):
            raise ApiError(405, f"method {method} not allowed")
        if method == "GET" and (found := asset(path)) is not None:
            self._send(200, found[0], found[1])
            return
        parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/")]
        if parts[:1] != ["api"]:
            raise ApiError(404, f"no page at {path[:100]}")
        route = parts[1:]
        if method == "GET" and route == ["runs"]:
            self._json(200, {"runs": backend.runs(RunFilter.from_query(query))})
        elif method == "GET" and len(route) == 2 and route[0] == "runs":
            self._json(200, backend.run(route[1]))
        elif method == "GET" and len(route) == 3 and route[0] == "runs" and route[2] == "cost":
            self._json(200, backend.cost(route[1]))
        elif method == "GET" and len(route) == 3 and route[0] == "runs" and route[2] == "approvals":
            self._json(200, {"approvals": backend.pending(route[1])})
        elif method == "GET" and len(route) == 3 and route[0] == "runs" and route[2] == "events":
            self._stream(route[1], query)
        elif method == "POST" and len(route) == 3 and route[0] == "runs" and route[2] in _STEERING:
            self._steer(route[1], route[2], self._body())
        elif method == "POST" and len(route) == 3 and route[0] == "approvals" and route[2] == "decision":
            self._json(200, backend.decide(route[1], self._body()))
        else:
            raise ApiError(404, f"no route {method} {path[:100]}")

    def _steer(self, run_id: str, action: str, body: dict[str, Any]) -> None:
        backend = self.server_ui.backend
        if action == "send":
            self._json(200, backend.send(run_id, body.get("text")))
        elif action == "stop":
            self._json(200, backend.stop(run_id, body.get("reason")))
        else:
            self._json(200, getattr(backend, action)(run_id))

    def _body(self) -> dict[str, Any]:
        """The request's JSON object (a JSON content type is required: no form can post here)."""
        if (self.headers.get("Content-Type") or "").split(";")[0].strip() != "application/json":
            raise ApiError(415, "the body must be JSON (Content-Type: application/json)")
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise ApiError(400, "Content-Length: not a number") from None
        if length > MAX_BODY_BYTES:
            raise ApiError(413, f"the body is over {MAX_BODY_BYTES} bytes")
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ApiError(400, "the body is not valid JSON") from None
        if not isinstance(body, dict):
            raise ApiError(400, "the body must be a JSON object")
        return body

    # the event stream -------------------------------------------------------------------------

    def _stream(self, run_id: str, query: dict[str, list[str]]) -> None:
        """Server-Sent Events: each event with its offset as ``id`` (a reconnecting EventSource
        sends it back as ``Last-Event-ID`` and gets exactly what it missed), ``event: end`` once
        the run's latest execution has ended and every event before that was sent."""
        ui = self.server_ui
        after = _offset(self.headers.get("Last-Event-ID") or (query.get("after") or ["-1"])[0])
        run_status = ui.backend.status_reader(run_id)
        status = lambda: "ABORTED" if ui.stopping.is_set() else run_status()  # noqa: E731 - a closing UI ends its follows
        ui.backend.require(run_id)  # an unknown run is answered (404) before the stream starts
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        for name, value in SECURITY_HEADERS.items():
            self.send_header(name, value)
        self.end_headers()
        last_write = [time.monotonic()]

        def write(text: str) -> None:
            self.wfile.write(text.encode("utf-8"))
            self.wfile.flush()
            last_write[0] = time.monotonic()

        def sleep(seconds: float) -> None:
            if time.monotonic() - last_write[0] >= KEEPALIVE_SECONDS:
                write(": keepalive\n\n")
            ui.stopping.wait(seconds)

        write("retry: 2000\n\n")
        for event in live.follow(ui.backend.log, run_id, status, after, ui.poll_seconds, sleep):
            write(_sse(event))
        write(f"event: end\ndata: {json.dumps({'status': status()})}\n\n")

    # answers ----------------------------------------------------------------------------------

    def _json(self, status: int, body: Any) -> None:
        self._send(status, json.dumps(body, default=str).encode("utf-8"), "application/json")

    def _send(self, status: int, body: bytes, content_type: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in {**SECURITY_HEADERS, **(extra or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


def _sse(event: dict[str, Any]) -> str:
    """One event as SSE: ``id`` its offset, ``data`` its JSON (one line: JSON escapes newlines)."""
    return f"id: {event['offset']}\ndata: {json.dumps(event, default=str)}\n\n"


def _offset(text: str) -> int:
    try:
        return max(-1, int(text))
    except ValueError:
        raise ApiError(400, f"Last-Event-ID: {text[:40]!r} is not an offset") from None
