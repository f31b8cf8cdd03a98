"""JSON over HTTPS with the standard library, behind an injectable transport.

Providers take a ``Transport``: a callable from :class:`HttpRequest` to :class:`HttpResponse`.
In Lambda it is :func:`urllib_transport`; tests pass one that replays recorded responses, so no
test touches the network. HTTP failures are sorted into Longstep's classes here, once.
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Callable

from longstep.errors import LongstepError, ModelAccessError, ServiceUnavailableError, ThrottledError

# Above the longest reply we expect (minutes for a long generation), below Lambda's 900 s cap;
# the function's own timeout still bounds the call.
DEFAULT_TIMEOUT_SECONDS = 600.0


@dataclass(frozen=True)
class HttpRequest:
    """One POST of a JSON body."""

    url: str
    headers: dict[str, str]
    body: dict[str, Any]
    timeout: float = DEFAULT_TIMEOUT_SECONDS


@dataclass(frozen=True)
class HttpResponse:
    """An HTTP answer: status, headers (lower-case names) and the raw body."""

    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)

    def json(self) -> Any:
        """The body parsed as JSON.

        Raises:
            ServiceUnavailableError: the body is not JSON (a proxy's error page, a cut connection).
        """
        try:
            return json.loads(self.body.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ServiceUnavailableError(f"model endpoint answered {self.status} with a body that is not JSON: {exc}") from None


Transport = Callable[[HttpRequest], HttpResponse]


def urllib_transport(request: HttpRequest) -> HttpResponse:
    """Send ``request`` with ``urllib``; an HTTP error status is returned, not raised.

    Raises:
        ServiceUnavailableError: the connection failed or timed out.
    """
    data = json.dumps(request.body).encode("utf-8")
    req = urllib.request.Request(request.url, data=data, headers={**request.headers, "content-type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=request.timeout) as resp:  # noqa: S310 (https URL from configuration)
            return HttpResponse(resp.status, resp.read(), {k.lower(): v for k, v in resp.headers.items()})
    except urllib.error.HTTPError as exc:
        return HttpResponse(exc.code, exc.read() or b"", {k.lower(): v for k, v in (exc.headers or {}).items()})
    except (urllib.error.URLError, socket.timeout, TimeoutError, ConnectionError) as exc:
        raise ServiceUnavailableError(f"{type(exc).__name__}: {exc}") from exc


def classify_status(response: HttpResponse, provider: str) -> LongstepError | None:
    """The Longstep error an HTTP status stands for, or None for a 2xx.

    429 is throttling; 408, 5xx and Anthropic's 529 (overloaded) are transient; any other 4xx
    (bad key, unknown model, invalid request) is permanent and escalates.
    """
    if 200 <= response.status < 300:
        return None
    detail = _error_detail(response)
    message = f"{provider} HTTP {response.status}: {detail}"
    if response.status == 429:
        return ThrottledError(message)
    if response.status == 408 or response.status >= 500:
        return ServiceUnavailableError(message)
    return ModelAccessError(message)


def _error_detail(response: HttpResponse) -> str:
    """The error message of an error body (both APIs use ``{"error": {"type"/"code", "message"}}``)."""
    try:
        error = json.loads(response.body.decode("utf-8")).get("error", {})
    except (UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        return response.body[:200].decode("utf-8", errors="replace")
    if not isinstance(error, dict):
        return str(error)[:200]
    kind = "/".join(str(part) for part in (error.get("type"), error.get("code")) if part) or "error"
    return f"{kind}: {error.get('message', '')}"[:500]
