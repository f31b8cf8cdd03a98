"""What every request to the run UI must pass before any route runs.

The UI acts with the operator's own AWS credentials, so a request it serves is as good as the
operator's: it must come from the operator's browser, on this machine, through this UI's page.

- **Host**: ``127.0.0.1:<port>``, ``localhost:<port>`` or ``[::1]:<port>`` only. A page on
  another site whose name was re-pointed at 127.0.0.1 (DNS rebinding) sends its own name as
  ``Host``, and is refused before anything else is read.
- **Origin**: when a request carries one (browsers send it on every POST and on cross-origin
  reads), it must be this UI's own. A POST without one must carry the token in the header
  ``X-Longstep-Token`` (a script's request; a browser cannot add that header to a cross-origin
  request without a CORS preflight, which this server never grants: it sends no
  ``Access-Control-*`` header at all). ``Sec-Fetch-Site``, when sent, must be ``same-origin`` or
  ``none`` (the operator typed or pasted the link).
- **Token**: a random token made for each serve, in the link ``longstep ui`` prints. Opening the
  link trades it for a cookie (``HttpOnly``, ``SameSite=Strict``, named after the port, since
  cookies are shared by every port of a host) and redirects to a URL without it; every route,
  the page and its assets included, then needs that cookie or the header. Compared in constant
  time.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from dataclasses import dataclass
from http.cookies import CookieError, SimpleCookie
from typing import Mapping

TOKEN_HEADER = "X-Longstep-Token"
TOKEN_QUERY = "token"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
SAFE_FETCH_SITES = ("same-origin", "none")


def new_token() -> str:
    """A token for one serve: 256 bits, URL-safe."""
    return secrets.token_urlsafe(32)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is this machine's loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Refusal:
    """Why a request is refused: its HTTP status and one line for whoever sent it."""

    status: int
    message: str


@dataclass(frozen=True)
class Guard:
    """The checks of one serve.

    Args:
        token: this serve's token.
        port: the port the UI listens on (the ``Host`` and ``Origin`` it answers to).
        extra_hosts: other names it answers to (the address of a non-loopback bind, allowed by
            ``--allow-remote``); loopback names always.
    """

    token: str
    port: int
    extra_hosts: tuple[str, ...] = ()

    @property
    def cookie_name(self) -> str:
        return f"longstep_ui_{self.port}"

    def hosts(self) -> set[str]:
        """The ``Host`` headers this UI answers to."""
        return {f"{name}:{self.port}" for name in (*LOOPBACK_NAMES, *self.extra_hosts)}

    def origins(self) -> set[str]:
        """This UI's own origins."""
        return {f"http://{host}" for host in self.hosts()}

    def set_cookie(self) -> str:
        """The ``Set-Cookie`` value that holds the token once the printed link was opened."""
        return f"{self.cookie_name}={self.token}; HttpOnly; SameSite=Strict; Path=/"

    def valid(self, candidate: str | None) -> bool:
        return bool(candidate) and hmac.compare_digest(str(candidate).encode(), self.token.encode())

    def origin_refusal(self, method: str, headers: Mapping[str, str]) -> Refusal | None:
        """The ``Host``, ``Origin`` and ``Sec-Fetch-Site`` checks (before the token is looked at)."""
        host = headers.get("Host")
        if host not in self.hosts():
            return Refusal(403, f"Host {str(host)[:100]!r} is not this UI's address (open the link `longstep ui` printed)")
        origin = headers.get("Origin")
        if origin is not None and origin not in self.origins():
            return Refusal(403, f"Origin {origin[:100]!r} may not use this UI")
        site = headers.get("Sec-Fetch-Site")
        if site is not None and site not in SAFE_FETCH_SITES:
            return Refusal(403, f"a {site} request may not use this UI")
        if method != "GET" and origin is None and TOKEN_HEADER not in headers:
            return Refusal(403, f"a POST needs this UI's Origin or the {TOKEN_HEADER} header")
        return None

    def token_of(self, headers: Mapping[str, str]) -> str | None:
        """The token a request carries: the header, else the cookie."""
        if headers.get(TOKEN_HEADER):
            return headers[TOKEN_HEADER]
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("Cookie") or "")
        except CookieError:
            return None
        morsel = cookie.get(self.cookie_name)
        return morsel.value if morsel is not None else None

    def check(self, method: str, headers: Mapping[str, str]) -> Refusal | None:
        """Every check; None when the request may go on to its route."""
        refused = self.origin_refusal(method, headers)
        if refused is not None:
            return refused
        if not self.valid(self.token_of(headers)):
            return Refusal(401, "this UI needs its token: open the link `longstep ui` printed")
        return None
