"""The local endpoint's door: what a request must show before the served stack answers it.

``longstep local serve`` (and ``local run --serve``, ``--approve external``) serves moto's APIs and
the approval pages on the developer's machine with no AWS credential check: moto accepts any
signature. Whoever can send it a request can read the link-signing key (``GetSecretValue``),
approve (``SendTaskSuccess``), start runs, read checkpoints and move the clock. The processes of
the developer's own shells are meant to; a web page open in their browser is not. A browser
reaches a loopback port in three ways, each closed here:

- a cross-origin request from the page (``fetch``, a form post): it carries an ``Origin`` that is
  not the server's own, and no CORS header ever answers it (moto's server allowed every origin
  and ``x-amz-target``). CORS: https://fetch.spec.whatwg.org/#http-cors-protocol and
  https://docs.aws.amazon.com/AmazonS3/latest/userguide/cors.html (AWS's endpoints answer only
  the origins a resource's CORS configuration names);
- a request with no ``Origin`` (``<img>``, ``<script>``, a link): browsers mark it with
  ``Sec-Fetch-Site: cross-site`` (https://www.w3.org/TR/fetch-metadata/), and an AWS API request
  must carry a Signature Version 4 signature, which no such request can
  (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv.html); only the approval pages
  take top-level navigations from other sites (a link in a notification);
- DNS rebinding (a name the attacker controls made to resolve to 127.0.0.1): the request's
  ``Host`` names the attacker's domain, and only loopback hosts (and, with ``--allow-remote``,
  the address served on) are answered.

The control routes (``/_longstep/...`` and moto's ``/moto-api/``) also need the serve's token
(``X-Longstep-Token``): printed by the command, written to its ready file, sent by ``longstep
local advance``. One read is open to a signed request as well: a GET of the clock (the stack's
virtual now, which every execution's dates already tell a signed ``DescribeExecution``), so the
CLI's views age runs on the stack's clock without the token; moving the clock needs the token.
The AWS CLI and SDKs send no ``Origin``, sign every request, and name ``127.0.0.1:PORT`` as the
host: they pass.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import secrets
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

TOKEN_HEADER = "X-Longstep-Token"
TOKEN_ENV = "LONGSTEP_LOCAL_TOKEN"  # where ``longstep local advance`` reads the token when not given
CONTROL_PREFIXES = ("/_longstep/", "/moto-api")
# The served virtual clock: GET reads it, POST moves it (``longstep local serve``'s route).
CLOCK_ROUTE = "/_longstep/clock"
# A scenario run on the served stack (``longstep local run --endpoint-url``, local/served_runs.py).
RUN_ROUTE = "/_longstep/run"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
SAME = ("same-origin", "none")  # Sec-Fetch-Site values of the server's own pages and of typed URLs


def new_token() -> str:
    """A fresh per-serve token (256 bits)."""
    return secrets.token_urlsafe(32)


def is_loopback(host: str) -> bool:
    """Whether the address ``host`` (as given to ``--host``) is this machine only."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve anywhere


def _ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
        return True
    except ValueError:
        return False


@dataclass
class Door:
    """What one served port lets in.

    Args:
        port: the port served.
        bind_host: the address served on (loopback unless ``--allow-remote``).
        token: the serve's token for the control routes (None: the port has none).
        signed: AWS API requests must carry a SigV4 signature (moto's endpoint; not the pages).
        navigations: top-level GET navigations from other sites are answered (the approval pages:
            people open them from a notification; a page's GET never decides).
    """

    port: int
    bind_host: str = "127.0.0.1"
    token: str | None = None
    signed: bool = False
    navigations: bool = False
    refused: deque[str] = field(default_factory=lambda: deque(maxlen=100))  # why the last requests refused were

    def hosts(self) -> set[str]:
        """The ``Host`` values answered: loopback names, and the bound address, with the port."""
        names = set(LOOPBACK_NAMES)
        if self.bind_host not in ("0.0.0.0", "::", ""):
            names.add(f"[{self.bind_host}]" if ":" in self.bind_host else self.bind_host)
        return {f"{name}:{self.port}" for name in names}

    def origins(self) -> set[str]:
        """The server's own origins."""
        return {f"http://{host}" for host in self.hosts()}

    def refusal(self, method: str, path: str, query: str, headers: Mapping[str, str]) -> str | None:
        """Why this request is refused, or None to answer it.

        Args:
            method: the HTTP method.
            path: the path, without the query.
            query: the query string.
            headers: the request's headers, names lowercased.
        """
        host = headers.get("host", "").lower()
        wildcard = self.bind_host in ("0.0.0.0", "::")
        if host not in self.hosts() and not (wildcard and _ip_literal(host.rsplit(":", 1)[0]) and host.endswith(f":{self.port}")):
            return f"Host {host or '(none)'!r} is not this server (DNS rebinding?)"
        origin = headers.get("origin")
        site = headers.get("sec-fetch-site")
        if origin is not None and origin.lower() not in self.origins():
            # A page of this server whose referrer policy is no-referrer posts with Origin: null.
            if not (origin == "null" and site == "same-origin"):
                return f"Origin {origin!r} is not this server's"
        if site is not None and site not in SAME:
            navigation = method == "GET" and headers.get("sec-fetch-mode") == "navigate"
            if not (self.navigations and navigation):
                return f"a {site} request (Sec-Fetch-Site)"
        signed = headers.get("authorization", "").startswith("AWS4-HMAC-SHA256 ") or "X-Amz-Signature=" in query
        if path.startswith(CONTROL_PREFIXES):
            given = headers.get(TOKEN_HEADER.lower(), "")
            reads_clock = self.signed and signed and method == "GET" and path == CLOCK_ROUTE
            if not reads_clock and (self.token is None or not hmac.compare_digest(given.encode(), self.token.encode())):
                return f"{path}: the serve's token is required ({TOKEN_HEADER})"
        elif self.signed and not signed:
            return "an AWS API request must be signed (Signature Version 4)"
        return None

    def refuse(self, reason: str) -> tuple[str, list[tuple[str, str]], bytes]:
        """The 403 answer to a refused request (no CORS header: the browser shows the page nothing)."""
        self.refused.append(reason)
        body = json.dumps({"error": "forbidden", "message": f"refused by the local endpoint: {reason}"}).encode()
        return "403 Forbidden", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))], body


class Guarded:
    """WSGI middleware: the request goes to ``app`` only through ``door``; responses lose every
    ``Access-Control-*`` header (moto's server adds them for any origin).

    Args:
        app: the WSGI application behind the door.
        door: what it lets in.
    """

    def __init__(self, app: Callable[..., Any], door: Door) -> None:
        self.app, self.door = app, door

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        headers = {key[5:].replace("_", "-").lower(): value for key, value in environ.items() if key.startswith("HTTP_")}
        method = environ.get("REQUEST_METHOD", "GET")
        reason = self.door.refusal(method, environ.get("PATH_INFO", ""), environ.get("QUERY_STRING", ""), headers)
        if reason is not None:
            status, response_headers, body = self.door.refuse(reason)
            start_response(status, response_headers)
            return [body]

        def without_cors(status: str, response_headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            kept = [(name, value) for name, value in response_headers if not name.lower().startswith("access-control-")]
            return start_response(status, kept, exc_info)

        return self.app(environ, without_cors)
