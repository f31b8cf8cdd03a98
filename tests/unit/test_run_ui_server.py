"""The run UI's server on its own (a stub backend, no stack): the token, ``Host`` and ``Origin``
checks every route passes, the printed link traded for a cookie, no CORS, loopback-only binding,
and the event stream's framing with ``Last-Event-ID``."""

from __future__ import annotations

import http.client
import json

import pytest

from longstep_kit.ui.guard import TOKEN_HEADER, Guard
from longstep_kit.ui.server import UiBindError, UiServer

EVENTS = [{"offset": i, "type": "model.delta", "at": 1.0, "step": "model#000000", "text": f"piece {i}\n<b>"} for i in range(5)]


class _Log:
    def read(self, run_id, after=-1):
        return [e for e in EVENTS if e["offset"] > after]


class _Backend:
    """What the routes call, recorded."""

    log = _Log()
    who = "tester"

    def __init__(self):
        self.calls = []

    def runs(self, where):
        self.calls.append(("runs", where))
        return [{"run_id": "r1", "status": "running"}]

    def pause(self, run_id):
        self.calls.append(("pause", run_id))
        return {"run_id": run_id, "changed": True}

    def require(self, run_id):
        pass

    def status_reader(self, run_id):
        return lambda: "SUCCEEDED"


@pytest.fixture
def served():
    backend = _Backend()
    with UiServer(backend, poll_seconds=0.01) as server:
        yield server, backend


def _request(server, method, path, headers=None, body=None, host=None):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
    sent = {"Host": host or f"127.0.0.1:{server.port}", **(headers or {})}
    data = json.dumps(body).encode() if body is not None else None
    if data is not None:
        sent.setdefault("Content-Type", "application/json")
        sent["Content-Length"] = str(len(data))
    for name, value in sent.items():
        conn.putheader(name, value)
    conn.endheaders(data)
    response = conn.getresponse()
    payload = response.read()
    conn.close()
    return response.status, dict(response.getheaders()), payload


def _auth(server):
    return {"Cookie": f"{server.guard.cookie_name}={server.guard.token}"}


def test_every_route_needs_the_token(served):
    server, backend = served
    for path in ("/", "/static/ui.js", "/api/runs", "/api/runs/r1/events"):
        status, _, body = _request(server, "GET", path)
        assert status == 401 and "open the link `longstep ui` printed" in json.loads(body)["error"], path
    assert _request(server, "GET", "/api/runs", {"Cookie": f"{server.guard.cookie_name}=wrong"})[0] == 401
    assert _request(server, "GET", "/api/runs", {TOKEN_HEADER: "wrong"})[0] == 401
    assert backend.calls == []  # nothing ran for a request without the token
    status, _, body = _request(server, "GET", "/api/runs", _auth(server))
    assert status == 200 and json.loads(body) == {"runs": [{"run_id": "r1", "status": "running"}]}
    assert _request(server, "GET", "/api/runs", {TOKEN_HEADER: server.guard.token})[0] == 200


def test_the_printed_link_trades_its_token_for_a_strict_cookie(served):
    server, _ = served
    assert server.url.startswith(f"http://127.0.0.1:{server.port}/?token=")
    status, headers, _ = _request(server, "GET", server.url.split(str(server.port), 1)[1])
    assert status == 303 and headers["Location"] == "/"  # the token leaves the address bar
    cookie = headers["Set-Cookie"]
    assert cookie.startswith(f"longstep_ui_{server.port}={server.guard.token};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    status, headers, page = _request(server, "GET", "/", _auth(server))
    assert status == 200 and b'<script src="/static/ui.js"' in page
    assert "script-src 'self'" in headers["Content-Security-Policy"] and "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    # A wrong token in the link sets no cookie.
    status, headers, _ = _request(server, "GET", "/?token=guessed")
    assert status == 401 and "Set-Cookie" not in headers


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1:1", "localhost", "192.168.1.5:{port}"])
def test_a_host_that_is_not_loopback_on_this_port_is_refused(served, host):
    """DNS rebinding: a page whose name now points at 127.0.0.1 sends its own name as Host."""
    server, backend = served
    status, _, body = _request(server, "GET", "/api/runs", {**_auth(server), TOKEN_HEADER: server.guard.token}, host=host.format(port=server.port))
    assert status == 403 and "is not this UI's address" in json.loads(body)["error"]
    assert backend.calls == []


def test_loopback_names_are_this_uis_hosts(served):
    server, _ = served
    for host in ("localhost", "[::1]", "127.0.0.1"):
        assert _request(server, "GET", "/api/runs", _auth(server), host=f"{host}:{server.port}")[0] == 200


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://127.0.0.1:1", "https://127.0.0.1:{port}"])
def test_another_origin_is_refused_even_with_the_cookie(served, origin):
    server, backend = served
    headers = {**_auth(server), "Origin": origin.format(port=server.port)}
    assert _request(server, "GET", "/api/runs", headers)[0] == 403
    assert _request(server, "POST", "/api/runs/r1/pause", headers, body={})[0] == 403
    assert backend.calls == []


def test_a_post_needs_this_origin_or_the_token_header_and_json(served):
    server, backend = served
    own = f"http://127.0.0.1:{server.port}"
    status, _, body = _request(server, "POST", "/api/runs/r1/pause", _auth(server), body={})
    assert status == 403 and "Origin" in json.loads(body)["error"]
    assert backend.calls == []
    # A form (a simple cross-site request's only way in) is not JSON.
    status, _, _ = _request(server, "POST", "/api/runs/r1/pause", {**_auth(server), "Origin": own, "Content-Type": "text/plain"}, body={})
    assert status == 415 and backend.calls == []
    assert _request(server, "POST", "/api/runs/r1/pause", {**_auth(server), "Origin": own}, body={})[0] == 200
    assert _request(server, "POST", "/api/runs/r1/pause", {TOKEN_HEADER: server.guard.token}, body={})[0] == 200
    assert backend.calls == [("pause", "r1"), ("pause", "r1")]


def test_cross_site_fetches_are_refused_and_no_cors_is_granted(served):
    server, backend = served
    status, headers, _ = _request(server, "GET", "/api/runs", {**_auth(server), "Sec-Fetch-Site": "cross-site"})
    assert status == 403
    status, headers, _ = _request(server, "OPTIONS", "/api/runs/r1/pause", {"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"})
    assert status == 403 and not any(name.lower().startswith("access-control-") for name in headers)
    status, headers, _ = _request(server, "GET", "/api/runs", {**_auth(server), "Sec-Fetch-Site": "same-origin"})
    assert status == 200 and not any(name.lower().startswith("access-control-") for name in headers)


def test_it_listens_on_loopback_only_unless_told_loudly():
    with pytest.raises(UiBindError, match=r"--host 0\.0\.0\.0: the run UI listens on loopback only.*--allow-remote"):
        UiServer(_Backend(), host="0.0.0.0")
    with pytest.raises(UiBindError):
        UiServer(_Backend(), host="192.168.1.5")
    assert Guard("t", 8000, ("192.168.1.5",)).hosts() >= {"192.168.1.5:8000", "127.0.0.1:8000"}


def test_the_event_stream_honours_last_event_id(served):
    server, _ = served
    status, headers, body = _request(server, "GET", "/api/runs/r1/events", {**_auth(server), "Last-Event-ID": "2"})
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    frames = [f for f in body.decode().split("\n\n") if f]
    assert frames[0] == "retry: 2000"
    sent = [f for f in frames if f.startswith("id: ")]
    assert [int(f.split("\n")[0][4:]) for f in sent] == [3, 4]  # exactly the events after 2
    assert json.loads(sent[0].split("\n", 1)[1][len("data: ") :]) == EVENTS[3]  # newlines stay inside the JSON
    assert frames[-1] == 'event: end\ndata: {"status": "SUCCEEDED"}'
    _, _, body = _request(server, "GET", "/api/runs/r1/events?after=-1", _auth(server))
    assert body.decode().count("\n\nid: ") == 5
    assert _request(server, "GET", "/api/runs/r1/events", {**_auth(server), "Last-Event-ID": "x"})[0] == 400
