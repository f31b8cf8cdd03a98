"""Signed links: a capability to decide one approval request, to answer one escalation, or to read
an inbox, until it expires.

A link carries ``v1.<payload>.<mac>``: the payload is compact JSON (base64url) naming the scope
(one approval id, one escalation, a list of runs, or an agent), the subject the link was issued to, and the expiry
(epoch seconds); the MAC is HMAC-SHA256 over a domain tag and the encoded payload. The scope is
inside the MAC, so a stolen link cannot be widened: changing one byte of the payload (another
approval id, more runs, a later expiry) invalidates it.

Keys live in Secrets Manager (one secret; its ``AWSCURRENT`` version signs). Verification accepts
``AWSCURRENT`` and ``AWSPREVIOUS``: rotating the secret (a rotation Lambda, or a manual
``put-secret-value``) moves ``AWSPREVIOUS`` to the old version automatically, so the links in
flight keep working for one more rotation period. (Secrets Manager: "Whenever you move AWSCURRENT,
Secrets Manager automatically moves the label AWSPREVIOUS to the version that AWSCURRENT was removed
from": https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_UpdateSecretVersionStage.html
and, for PutSecretValue without VersionStages, the same move:
https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/secretsmanager/aws.sdk.kotlin.services.secretsmanager.model/-put-secret-value-request/version-stages.html)

CSRF tokens (for the decision form) are HMACs too, under another domain tag, over the link and a
per-page nonce: a form posted to a link must carry a token that only the server could have put in
a page it rendered for that link. Neither a link nor a CSRF token is ever logged.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from longstep.settings import ENV_LINK_KEY_SECRET as ENV_LINK_KEY_SECRET  # the function variable naming the link key's secret
from longstep.errors import ExpiredLinkError, InvalidLinkError, LinkError, LinkKeyError  # noqa: F401 - callers catch links.*Error

VERSION = "v1"
_LINK_TAG = b"longstep-link-v1\x00"
_CSRF_TAG = b"longstep-csrf-v1\x00"
MAX_LINK_CHARS = 2_000  # well under API Gateway's URL limits; an inbox names at most MAX_RUNS runs
MAX_RUNS = 20
MAX_SUBJECT_CHARS = 200
MIN_KEY_BYTES = 32
KEY_CACHE_SECONDS = 300.0  # a rotated key is picked up within this long (links stay valid meanwhile)
_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,128}")


@dataclass(frozen=True)
class Scope:
    """What a link grants: exactly one of ``approval`` (decide that request), ``escalation``
    (answer the escalation ``(run_id, turn, call, times)``: ``call`` as in its key, negative for a
    model turn or a run step; ``times`` which escalation of that step, so that a link never
    answers a later one), ``runs`` or ``agent`` (read an inbox of those runs' or that agent's
    pending requests, and decide them)."""

    approval: str | None = None
    runs: tuple[str, ...] = ()
    agent: str | None = None
    escalation: tuple[str, int, int, int] | None = None

    def __post_init__(self) -> None:
        given = sum(bool(x) for x in (self.approval, self.runs, self.agent, self.escalation))
        if given != 1:
            raise ValueError("scope: exactly one of approval, escalation, runs or agent is required")
        if self.escalation is not None:
            run_id, *numbers = self.escalation
            if len(numbers) != 3 or not all(type(n) is int for n in numbers) or not _NAME.fullmatch(str(run_id)):
                raise ValueError("scope.escalation: (run_id, turn, call, times) is required")
        if len(self.runs) > MAX_RUNS:
            raise ValueError(f"scope.runs: at most {MAX_RUNS} runs")
        for name in (self.approval, self.agent, *self.runs):
            if name is not None and not _NAME.fullmatch(name):
                raise ValueError(f"scope: {name[:40]!r} is not a valid id")

    @property
    def is_inbox(self) -> bool:
        return self.approval is None and self.escalation is None

    def covers(self, request: dict[str, Any]) -> bool:
        """Whether ``request`` (an approval item or view: ``approval_id``, ``run_id``, ``agent``) is in scope."""
        if self.approval is not None:
            return request.get("approval_id") == self.approval
        if self.escalation is not None:  # an escalation is no approval request
            return False
        if self.runs:
            return request.get("run_id") in self.runs
        return request.get("agent") == self.agent

    def encode(self) -> dict[str, Any]:
        if self.approval is not None:
            return {"a": self.approval}
        if self.escalation is not None:
            return {"x": list(self.escalation)}
        return {"r": list(self.runs)} if self.runs else {"g": self.agent}

    @classmethod
    def decode(cls, raw: Any) -> "Scope":
        if not isinstance(raw, dict) or len(raw) != 1:
            raise ValueError("scope")
        ((kind, value),) = raw.items()
        if kind == "a" and isinstance(value, str):
            return cls(approval=value)
        if kind == "r" and isinstance(value, list) and all(isinstance(v, str) for v in value):
            return cls(runs=tuple(value))
        if kind == "g" and isinstance(value, str):
            return cls(agent=value)
        if kind == "x" and isinstance(value, list) and len(value) == 4 and all(type(v) is int for v in value[1:]):
            return cls(escalation=(str(value[0]), value[1], value[2], value[3]))
        raise ValueError("scope")


@dataclass(frozen=True)
class Capability:
    """A verified (or to-be-signed) link's content.

    Attributes:
        scope: what it grants.
        expires_at: epoch seconds after which it grants nothing.
        subject: to whom it was issued (a topic, a team, an address): recorded with decisions.
    """

    scope: Scope
    expires_at: int
    subject: str = "approvers"

    def __post_init__(self) -> None:
        if not 1 <= len(self.subject) <= MAX_SUBJECT_CHARS:
            raise ValueError(f"subject: 1-{MAX_SUBJECT_CHARS} characters")


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class KeyRing:
    """The signing key and the keys still accepted (the previous one during a rotation).

    Args:
        current: signs new links and CSRF tokens.
        previous: still verify (links issued before the last rotation).
    """

    current: bytes
    previous: tuple[bytes, ...] = ()

    def __post_init__(self) -> None:
        for key in (self.current, *self.previous):
            if len(key) < MIN_KEY_BYTES:
                raise LinkKeyError(f"link key: at least {MIN_KEY_BYTES} bytes are required")

    def __repr__(self) -> str:  # never print key material
        return f"KeyRing(keys={1 + len(self.previous)})"

    def _mac(self, key: bytes, tag: bytes, *parts: str) -> str:
        return _b64(hmac.new(key, tag + "\x00".join(parts).encode("utf-8"), hashlib.sha256).digest())

    def _matches(self, tag: bytes, mac: str, *parts: str) -> bool:
        # Every accepted key is tried, whatever the outcome: the time taken says nothing of which matched.
        found = False
        for key in (self.current, *self.previous):
            found |= hmac.compare_digest(self._mac(key, tag, *parts), mac)
        return found

    def sign(self, capability: Capability) -> str:
        """The link token for ``capability``."""
        body = {"s": capability.scope.encode(), "e": int(capability.expires_at), "u": capability.subject}
        payload = _b64(json.dumps(body, separators=(",", ":"), sort_keys=True).encode("utf-8"))
        token = f"{VERSION}.{payload}.{self._mac(self.current, _LINK_TAG, payload)}"
        if len(token) > MAX_LINK_CHARS:
            raise ValueError(f"link: longer than {MAX_LINK_CHARS} characters (name fewer runs)")
        return token

    def verify(self, token: Any, now: float) -> Capability:
        """The capability a link grants.

        Raises:
            InvalidLinkError: malformed or forged.
            ExpiredLinkError: genuine, but past its expiry.
        """
        if not isinstance(token, str) or len(token) > MAX_LINK_CHARS:
            raise InvalidLinkError("link: not a valid link")
        parts = token.split(".")
        if len(parts) != 3 or parts[0] != VERSION or not self._matches(_LINK_TAG, parts[2], parts[1]):
            raise InvalidLinkError("link: not a valid link")
        try:
            body = json.loads(_unb64(parts[1]))
            capability = Capability(Scope.decode(body["s"]), int(body["e"]), str(body["u"]))
        except (ValueError, KeyError, TypeError):
            raise InvalidLinkError("link: not a valid link") from None
        if now >= capability.expires_at:
            raise ExpiredLinkError("link: expired", capability)
        return capability

    def csrf_token(self, link: str, nonce: str) -> str:
        """The token a form rendered for ``link`` carries along with its ``nonce``."""
        return self._mac(self.current, _CSRF_TAG, link, nonce)

    def check_csrf(self, link: str, nonce: Any, token: Any) -> bool:
        """Whether ``token`` is the CSRF token of ``link`` and ``nonce`` (under an accepted key)."""
        if not isinstance(nonce, str) or not isinstance(token, str) or not 16 <= len(nonce) <= 64:
            return False
        return self._matches(_CSRF_TAG, token, link, nonce)


def keyring_from_secret(secrets: Any, secret_id: str) -> KeyRing:
    """The key ring of the secret's ``AWSCURRENT`` version, with ``AWSPREVIOUS`` when there is one.

    Raises:
        LinkKeyError: the secret or its current version cannot be read.
    """
    try:
        current = secrets.get_secret_value(SecretId=secret_id, VersionStage="AWSCURRENT")["SecretString"]
    except Exception as exc:  # noqa: BLE001 - named by type only: the message could quote the request
        raise LinkKeyError(f"link key: cannot read the secret ({type(exc).__name__})") from None
    previous: tuple[bytes, ...] = ()
    try:
        old = secrets.get_secret_value(SecretId=secret_id, VersionStage="AWSPREVIOUS")["SecretString"]
        previous = (old.encode("utf-8"),) if old != current else ()
    except Exception:  # noqa: BLE001 - no previous version before the first rotation
        pass
    return KeyRing(current.encode("utf-8"), previous)


@dataclass
class KeyCache:
    """Key rings by secret id, reread after ``ttl_seconds`` (warm invocations skip the read)."""

    ttl_seconds: float = KEY_CACHE_SECONDS
    clock: Callable[[], float] = time.monotonic
    _rings: dict[str, tuple[float, KeyRing]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, secrets: Any, secret_id: str) -> KeyRing:
        with self._lock:
            found = self._rings.get(secret_id)
            if found is not None and self.clock() - found[0] < self.ttl_seconds:
                return found[1]
        ring = keyring_from_secret(secrets, secret_id)
        with self._lock:
            self._rings[secret_id] = (self.clock(), ring)
        return ring

    def clear(self) -> None:
        with self._lock:
            self._rings.clear()


KEYS = KeyCache()


def decision_url(api_url: str, link: str) -> str:
    """The decision page of ``link`` under the approval API's base URL."""
    return f"{api_url.rstrip('/')}/pages/decide/{link}"


def escalation_url(api_url: str, link: str) -> str:
    """The escalation page of ``link`` under the approval API's base URL."""
    return f"{api_url.rstrip('/')}/pages/escalation/{link}"


def inbox_url(api_url: str, link: str) -> str:
    """The inbox page of ``link`` under the approval API's base URL."""
    return f"{api_url.rstrip('/')}/pages/inbox/{link}"
