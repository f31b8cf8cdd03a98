"""The local endpoint's door (``longstep_kit.local.endpoint_guard``) request by request: what the
AWS CLI, SDKs and the server's own pages send is answered; what a web page elsewhere, a rebound
name or a caller without the token sends is refused, with the reason."""

from __future__ import annotations

import pytest

from longstep_kit.local.endpoint_guard import TOKEN_HEADER, Door, Guarded, is_loopback

SIGNED = {"authorization": "AWS4-HMAC-SHA256 Credential=x/20260101/us-east-1/states/aws4_request, SignedHeaders=host, Signature=0"}
API = Door(4566, token="t0ken", signed=True)
PAGES = Door(4567, navigations=True)
OWN = "http://127.0.0.1:4567"


@pytest.mark.parametrize(
    ("door", "method", "path", "query", "headers", "refused_for"),
    [
        # The AWS CLI and boto3: signed, no Origin, Host 127.0.0.1:PORT (or localhost).
        (API, "POST", "/", "", {"host": "127.0.0.1:4566", **SIGNED}, None),
        (API, "POST", "/", "", {"host": "localhost:4566", **SIGNED}, None),
        (API, "GET", "/bucket/key", "X-Amz-Signature=abc&X-Amz-Credential=x", {"host": "127.0.0.1:4566"}, None),  # a presigned URL
        (API, "POST", "/", "", {"host": "127.0.0.1:4566"}, "signed"),
        (API, "POST", "/", "", {"host": "attacker.example:4566", **SIGNED}, "Host"),
        (API, "POST", "/", "", {"host": "127.0.0.1:4566", "origin": "http://attacker.example", **SIGNED}, "Origin"),
        (API, "POST", "/", "", {"host": "127.0.0.1:4566", "origin": "http://127.0.0.1:3000", **SIGNED}, "Origin"),  # another local port
        (API, "OPTIONS", "/", "", {"host": "127.0.0.1:4566", "origin": "http://attacker.example"}, "Origin"),
        (API, "GET", "/", "", {"host": "127.0.0.1:4566", "sec-fetch-site": "cross-site", **SIGNED}, "Sec-Fetch-Site"),
        (API, "GET", "/", "", {"host": "127.0.0.1:4566", "sec-fetch-site": "same-site", **SIGNED}, "Sec-Fetch-Site"),
        (API, "POST", "/_longstep/clock", "", {"host": "127.0.0.1:4566"}, "token"),
        (API, "POST", "/_longstep/clock", "", {"host": "127.0.0.1:4566", TOKEN_HEADER.lower(): "t0ke"}, "token"),
        (API, "POST", "/_longstep/clock", "", {"host": "127.0.0.1:4566", TOKEN_HEADER.lower(): "t0ken"}, None),
        (API, "POST", "/moto-api/reset", "", {"host": "127.0.0.1:4566", **SIGNED}, "token"),
        # Reading the clock is open to a signed request (the CLI's views); moving it is not.
        (API, "GET", "/_longstep/clock", "", {"host": "127.0.0.1:4566", **SIGNED}, None),
        (API, "GET", "/_longstep/clock", "", {"host": "127.0.0.1:4566"}, "token"),
        (API, "POST", "/_longstep/clock", "", {"host": "127.0.0.1:4566", **SIGNED}, "token"),
        (API, "GET", "/_longstep/clock", "", {"host": "127.0.0.1:4566", "sec-fetch-site": "cross-site", **SIGNED}, "Sec-Fetch-Site"),
        (API, "GET", "/moto-api/data.json", "", {"host": "127.0.0.1:4566", **SIGNED}, "token"),
        (PAGES, "GET", "/_longstep/clock", "", {"host": "127.0.0.1:4567", **SIGNED}, "token"),  # an unsigned door: the token only
        # The approval pages: their own form posts (Origin: null under no-referrer), links from mail.
        (PAGES, "POST", "/v1/pages/decide/x", "", {"host": "127.0.0.1:4567", "origin": OWN, "sec-fetch-site": "same-origin"}, None),
        (PAGES, "POST", "/v1/pages/decide/x", "", {"host": "127.0.0.1:4567", "origin": "null", "sec-fetch-site": "same-origin"}, None),
        (PAGES, "POST", "/v1/pages/decide/x", "", {"host": "127.0.0.1:4567", "origin": "null", "sec-fetch-site": "cross-site"}, "Origin"),
        (PAGES, "POST", "/v1/pages/decide/x", "", {"host": "127.0.0.1:4567", "origin": "http://attacker.example"}, "Origin"),
        (PAGES, "GET", "/v1/pages/decide/x", "", {"host": "127.0.0.1:4567", "sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate"}, None),
        (
            PAGES,
            "GET",
            "/v1/pages/decide/x",
            "",
            {"host": "127.0.0.1:4567", "sec-fetch-site": "cross-site", "sec-fetch-mode": "cors"},
            "Sec-Fetch-Site",
        ),
        (
            PAGES,
            "POST",
            "/v1/pages/decide/x",
            "",
            {"host": "127.0.0.1:4567", "sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate"},
            "Sec-Fetch-Site",
        ),
        (PAGES, "GET", "/v1/pages/decide/x", "", {"host": "rebound.example:4567"}, "Host"),
        (PAGES, "GET", "/v1/pages/decide/x", "", {"host": "127.0.0.1:4566"}, "Host"),  # the other port's name
    ],
)
def test_a_request_is_answered_or_refused_for_its_reason(door, method, path, query, headers, refused_for):
    reason = door.refusal(method, path, query, headers)
    if refused_for is None:
        assert reason is None
    else:
        assert reason is not None and refused_for in reason


def test_a_remote_bind_answers_its_address_and_ip_literals_never_a_name():
    bound = Door(4566, bind_host="192.168.1.20", signed=True)
    assert bound.refusal("POST", "/", "", {"host": "192.168.1.20:4566", **SIGNED}) is None
    anywhere = Door(4566, bind_host="0.0.0.0", signed=True)
    assert anywhere.refusal("POST", "/", "", {"host": "10.0.0.7:4566", **SIGNED}) is None
    assert "Host" in anywhere.refusal("POST", "/", "", {"host": "dev.example.com:4566", **SIGNED})
    assert [is_loopback(h) for h in ("127.0.0.1", "::1", "[::1]", "localhost", "127.0.0.2", "0.0.0.0", "192.168.1.20", "dev.example")] == [
        True, True, True, True, True, False, False, False,
    ]  # fmt: skip


def test_the_middleware_refuses_before_the_app_and_strips_cors_headers():
    seen = []

    def app(environ, start_response):
        seen.append(environ["PATH_INFO"])
        start_response("200 OK", [("Access-Control-Allow-Origin", "*"), ("Access-Control-Allow-Headers", "x-amz-target"), ("X-Kept", "1")])
        return [b"{}"]

    guarded = Guarded(app, Door(4566, token="t", signed=True))
    answers = []
    environ = {"REQUEST_METHOD": "POST", "PATH_INFO": "/", "HTTP_HOST": "127.0.0.1:4566", "HTTP_AUTHORIZATION": SIGNED["authorization"]}
    guarded({**environ, "HTTP_ORIGIN": "http://attacker.example"}, lambda status, headers, exc=None: answers.append((status, headers)))
    assert seen == [] and answers[-1][0] == "403 Forbidden"
    assert guarded.door.refused[-1].startswith("Origin")
    guarded(environ, lambda status, headers, exc=None: answers.append((status, headers)))
    assert seen == ["/"] and answers[-1] == ("200 OK", [("X-Kept", "1")])
