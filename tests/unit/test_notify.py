"""Notifications carry the page's link; the webhook posts {"text": ...} and never fails a request."""

from __future__ import annotations

import json

from longstep import clock, links
from longstep import settings as env
from longstep.humans import notifications as notify
from longstep.settings import ApprovalSettings

KEY = "k" * 64
NOW = 1_893_456_000.0  # 2030-01-01T00:00:00Z, when VIEW was requested
VIEW = {
    "approval_id": "abcDEF123",
    "run_id": "run-1",
    "turn": 3,
    "call": 0,
    "tool": "send_email",
    "input": {"to": "a@example.com"},
    "status": "pending",
    "requested_at": "2030-01-01T00:00:00Z",
    "expires_at": "2030-01-08T00:00:00Z",
    "decision": None,
    "approver": None,
    "decided_at": None,
}


class _Sns:
    def __init__(self):
        self.published = []

    def publish(self, **kwargs):
        self.published.append(kwargs)


class _Opener:
    def __init__(self, fail: bool = False):
        self.requests, self.fail = [], fail

    def __call__(self, request, timeout):
        if self.fail:
            raise OSError("connection refused")
        self.requests.append(request)

        class _Response:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

            def read(self, n):
                return b"ok"

        return _Response()


def _settings(**kw):
    return ApprovalSettings(table="approvals", topic_arn="arn:aws:sns:us-east-1:123456789012:t", api_url="https://api.example/v1/", **kw)


def test_the_approval_notification_links_to_its_decision_page(monkeypatch):
    ring = links.KeyRing(KEY.encode())
    monkeypatch.setattr(notify, "_keys", lambda environ: ring)
    sns, opener = _Sns(), _Opener()
    publish = notify.publisher(
        sns, _settings(), {links.ENV_LINK_KEY_SECRET: "s", notify.ENV_APPROVAL_WEBHOOK_URL: "https://hooks.example/T/B/X"}, opener
    )
    publish(VIEW)
    (message,) = sns.published
    bodies = json.loads(message["Message"])
    url = json.loads(bodies["default"])["decision_url"]
    assert url.startswith("https://api.example/v1/pages/decide/") and url in bodies["email"]
    capability = ring.verify(url.rsplit("/", 1)[1], NOW)
    assert capability.scope.approval == "abcDEF123"
    assert capability.expires_at == int(notify._epoch(VIEW["expires_at"], 0))  # expires with the request
    (request,) = opener.requests
    assert json.loads(request.data) == {"text": f"Approval needed: send_email in run run-1 (until 2030-01-08T00:00:00Z). Decide: {url}"}
    publish({**VIEW, "summary": "Send an email to a@example.com", "risk": "Final."})  # in the tool's own words
    assert json.loads(opener.requests[-1].data)["text"].startswith("Approval needed: Send an email to a@example.com (send_email) in run run-1")
    assert "Send an email to a@example.com\nRisk: Final.\n" in json.loads(sns.published[-1]["Message"])["email"]


def test_without_a_key_or_url_the_notification_has_no_link():
    sns = _Sns()
    notify.publisher(sns, _settings(), {})(VIEW)
    assert "decision_url" not in json.loads(json.loads(sns.published[0]["Message"])["default"])
    assert notify.publisher(sns, ApprovalSettings(table="t"), {}) is None


def test_a_failing_webhook_is_logged_never_raised(monkeypatch):
    logged = []
    monkeypatch.setattr(notify, "_log", lambda message, **extra: logged.append((message, extra)))
    assert notify.post_webhook("https://hooks.example/secret/path", "hello", _Opener(fail=True)) is False
    assert logged == [("approval webhook failed", {"webhook_host": "hooks.example", "error": "OSError"})]
    sns = _Sns()
    notify.publisher(sns, _settings(), {notify.ENV_APPROVAL_WEBHOOK_URL: "https://hooks.example/x"}, _Opener(fail=True))(VIEW)
    assert len(sns.published) == 1


def test_an_escalation_links_to_its_runs_inbox(monkeypatch):
    ring = links.KeyRing(KEY.encode())
    monkeypatch.setattr(notify, "_keys", lambda environ: ring)
    sns = _Sns()
    environ = {env.ENV_APPROVAL_TOPIC_ARN: "arn:t", env.ENV_APPROVAL_API_URL: "https://api.example/v1", links.ENV_LINK_KEY_SECRET: "s"}
    with clock.use_source(lambda: NOW):
        notify.notify_escalation(sns, {"run_id": "run-1", "turn": 4, "task": "CallTool", "error": "AccessDenied", "reason": "no"}, environ)
    (message,) = sns.published
    url = json.loads(json.loads(message["Message"])["default"])["inbox_url"]
    assert url.startswith("https://api.example/v1/pages/inbox/")
    capability = ring.verify(url.rsplit("/", 1)[1], NOW)
    assert capability.scope.runs == ("run-1",) and capability.expires_at == int(NOW) + notify.ESCALATION_LINK_SECONDS
    notify.notify_escalation(sns, {"run_id": "r", "turn": 1, "task": "ModelTurn", "error": "E", "reason": ""}, {})
    assert len(sns.published) == 1  # nothing configured: nobody told
