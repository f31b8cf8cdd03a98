"""Signed links: bound to their scope, expiring, verified under the current and the previous key."""

from __future__ import annotations

import json

import pytest

from longstep.links import (
    Capability,
    ExpiredLinkError,
    InvalidLinkError,
    KeyCache,
    KeyRing,
    LinkKeyError,
    Scope,
    _b64,
    _unb64,
    keyring_from_secret,
)

KEY = b"k" * 40
OTHER = b"o" * 40
NOW = 1_700_000_000


def _cap(**scope) -> Capability:
    return Capability(Scope(**scope), NOW + 3600, "ops@example.com")


def test_a_link_verifies_to_what_it_was_signed_with():
    ring = KeyRing(KEY)
    link = ring.sign(_cap(approval="abc_DEF-1"))
    got = ring.verify(link, NOW)
    assert got == _cap(approval="abc_DEF-1") and not got.scope.is_inbox


def test_a_link_cannot_be_widened_or_extended():
    ring = KeyRing(KEY)
    version, payload, mac = ring.sign(_cap(runs=("run-1",))).split(".")
    body = json.loads(_unb64(payload))
    for change in ({"s": {"r": ["run-1", "run-2"]}}, {"s": {"g": "triage"}}, {"e": NOW + 10**6}, {"u": "someone-else"}):
        forged = _b64(json.dumps({**body, **change}, separators=(",", ":"), sort_keys=True).encode())
        with pytest.raises(InvalidLinkError):
            ring.verify(f"{version}.{forged}.{mac}", NOW)


@pytest.mark.parametrize("bad", ["", "v1.x", "v2.a.b", "v1..", None, 42, "v1." + "a" * 3000 + ".b"])
def test_malformed_links_grant_nothing(bad):
    with pytest.raises(InvalidLinkError):
        KeyRing(KEY).verify(bad, NOW)


def test_a_link_expires():
    ring = KeyRing(KEY)
    link = ring.sign(_cap(agent="triage"))
    assert ring.verify(link, NOW + 3599).scope.agent == "triage"
    with pytest.raises(ExpiredLinkError) as caught:
        ring.verify(link, NOW + 3600)
    assert caught.value.capability.scope.agent == "triage"


def test_rotation_keeps_links_in_flight_valid_for_one_rotation():
    old_link = KeyRing(KEY).sign(_cap(approval="a1"))
    rotated = KeyRing(OTHER, previous=(KEY,))
    assert rotated.verify(old_link, NOW).scope.approval == "a1"
    with pytest.raises(InvalidLinkError):  # two rotations later the key is retired
        KeyRing(b"n" * 40, previous=(OTHER,)).verify(old_link, NOW)
    with pytest.raises(InvalidLinkError):  # another deployment's key
        KeyRing(OTHER).verify(old_link, NOW)


def test_csrf_tokens_are_bound_to_the_link_and_the_nonce():
    ring = KeyRing(KEY)
    link, nonce = ring.sign(_cap(approval="a1")), "n" * 22
    token = ring.csrf_token(link, nonce)
    assert ring.check_csrf(link, nonce, token)
    assert not ring.check_csrf(link, "m" * 22, token)
    assert not ring.check_csrf(ring.sign(_cap(approval="a2")), nonce, token)
    assert not ring.check_csrf(link, nonce, None) and not ring.check_csrf(link, "short", token)
    # A CSRF token is no link signature (another domain tag).
    payload = link.split(".")[1]
    with pytest.raises(InvalidLinkError):
        ring.verify(f"v1.{payload}.{ring.csrf_token(payload, nonce)}", NOW)


@pytest.mark.parametrize("scope", [{}, {"approval": "a", "agent": "b"}, {"runs": tuple(f"r{i}" for i in range(21))}, {"approval": "a/b"}])
def test_scopes_are_exactly_one_valid_thing(scope):
    with pytest.raises(ValueError):
        Scope(**scope)


def test_scope_covers():
    request = {"approval_id": "a1", "run_id": "r1", "agent": "triage"}
    assert Scope(approval="a1").covers(request) and not Scope(approval="a2").covers(request)
    assert Scope(runs=("r0", "r1")).covers(request) and not Scope(runs=("r2",)).covers(request)
    assert Scope(agent="triage").covers(request) and not Scope(agent="other").covers(request)


def test_short_keys_are_refused_and_keys_are_never_printed():
    with pytest.raises(LinkKeyError):
        KeyRing(b"short")
    assert "k" * 10 not in repr(KeyRing(KEY))


class _Secrets:
    def __init__(self, versions):
        self.versions, self.reads = versions, 0

    def get_secret_value(self, SecretId, VersionStage):
        self.reads += 1
        if VersionStage not in self.versions:
            raise KeyError(VersionStage)
        return {"SecretString": self.versions[VersionStage]}


def test_the_key_ring_comes_from_the_current_and_previous_versions():
    ring = keyring_from_secret(_Secrets({"AWSCURRENT": "c" * 40, "AWSPREVIOUS": "p" * 40}), "s")
    assert ring.current == b"c" * 40 and ring.previous == (b"p" * 40,)
    assert keyring_from_secret(_Secrets({"AWSCURRENT": "c" * 40}), "s").previous == ()
    with pytest.raises(LinkKeyError, match="KeyError"):
        keyring_from_secret(_Secrets({}), "s")


def test_the_key_cache_rereads_after_its_ttl():
    now = [0.0]
    cache, secrets = KeyCache(ttl_seconds=10, clock=lambda: now[0]), _Secrets({"AWSCURRENT": "c" * 40})
    cache.get(secrets, "s")
    cache.get(secrets, "s")
    assert secrets.reads == 2  # current + (missing) previous, once
    now[0] = 11
    cache.get(secrets, "s")
    assert secrets.reads == 4
