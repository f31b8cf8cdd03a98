"""Notifications: approvers hear of each request and escalation, with a signed link to its page.

Each approval request is published to the SNS topic (email and any other subscriber) with the
request's view, never its token, and a link to its decision page (bound to that one request,
expiring with it: ``longstep.links``); an escalation's notification links to the inbox of its run.
When a chat webhook is configured (``LONGSTEP_APPROVAL_WEBHOOK_URL``), both also go there as
``{"text": ...}``, the JSON that Slack incoming webhooks and Teams workflows accept. A webhook that
fails is logged (its host and the error type, never its URL, which is itself a secret, nor the
text, which holds the link) and never fails the request: approvers can still list it.

The links are minted here, at the source, with the current key of the secret named by
``LONGSTEP_LINK_KEY_SECRET`` under the API's URL (``LONGSTEP_APPROVAL_API_URL``); without either,
notifications go out without a link.
"""

from __future__ import annotations

import datetime as dt
import json
import urllib.request
from typing import Any, Callable, Mapping
from urllib.parse import urlsplit

from longstep import clock, environment, links
from longstep import settings as env
from longstep.settings import DEFAULT_APPROVAL_TIMEOUT_SECONDS, ENV_APPROVAL_WEBHOOK_URL, ApprovalSettings

WEBHOOK_TIMEOUT_SECONDS = 5.0
DEFAULT_SUBJECT = "approvers"
ESCALATION_LINK_SECONDS = 7 * 86_400


def log_failed_notification(approval_id: str, exc: Exception) -> None:
    """Log that telling approvers failed (the request stands: approvers can still list it)."""
    from longstep.observability import logs

    logs.logger().warning(
        "approval notification failed", extra={"approval_id": approval_id, "error": type(exc).__name__, "error_message": str(exc)[:500]}
    )


def notification(request_view: dict[str, Any], api_url: str | None = None) -> dict[str, Any]:
    """The SNS message telling approvers about a request (``Subject``, ``Message``, attributes).

    It carries the request's view, never its task token.
    """
    approval_id = request_view["approval_id"]
    # The tool's own words first (``Tool.summary``, ``Tool.risk``), when the request carries them.
    worded = [f"{request_view['summary']}", f"Risk: {request_view.get('risk', '')}", ""] if request_view.get("summary") else []
    lines = [
        *worded,
        f"Run {request_view['run_id']} asks to call {request_view['tool']} (turn {request_view['turn']}, call {request_view['call']}).",
        f"It waits until {request_view['expires_at']}.",
        "",
        "Arguments:",
        json.dumps(request_view["input"], indent=2, sort_keys=True),
        "",
        f"Approve:  longstep approve {approval_id}",
        f"Reject:   longstep reject {approval_id} --reason TEXT",
        f"Edit:     longstep approve {approval_id} --edit JSON",
    ]
    if api_url:
        lines.append(f"API:      POST {api_url.rstrip('/')}/approvals/{approval_id}/decision")
    subject = f"Approval needed: {request_view['tool']} in run {request_view['run_id']}"
    return {
        "Subject": subject.encode("ascii", "replace").decode()[:100],
        # Email gets the text; every other protocol (SQS, Lambda, HTTPS) gets the view as JSON.
        "Message": json.dumps({"default": json.dumps(request_view), "email": "\n".join(lines)}),
        "MessageStructure": "json",
        "MessageAttributes": {
            "run_id": {"DataType": "String", "StringValue": request_view["run_id"]},
            "tool": {"DataType": "String", "StringValue": request_view["tool"]},
        },
    }


def _log(message: str, **extra: Any) -> None:
    from longstep.observability import logs

    logs.logger().warning(message, extra=extra)


def _epoch(iso: str | None, default: float) -> float:
    if not iso:
        return default
    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _keys(environ: Mapping[str, str]) -> links.KeyRing | None:
    secret_id = environ.get(links.ENV_LINK_KEY_SECRET, "").strip()
    if not secret_id:
        return None
    from longstep import clients

    try:
        return links.KEYS.get(clients.client("secretsmanager"), secret_id)
    except links.LinkKeyError as exc:  # the notification still goes out, without its link
        _log("notification without a link", error=str(exc))
        return None


def decision_link(api_url: str | None, ring: links.KeyRing | None, request_view: dict[str, Any], subject: str = DEFAULT_SUBJECT) -> str | None:
    """The decision page of a request (``requests.view``), valid until the request expires."""
    if not api_url or ring is None:
        return None
    expires = _epoch(request_view.get("expires_at"), clock.now() + DEFAULT_APPROVAL_TIMEOUT_SECONDS)
    capability = links.Capability(links.Scope(approval=request_view["approval_id"]), int(expires), subject)
    return links.decision_url(api_url, ring.sign(capability))


def run_inbox_link(
    api_url: str | None, ring: links.KeyRing | None, run_id: str, seconds: int = ESCALATION_LINK_SECONDS, subject: str = DEFAULT_SUBJECT
) -> str | None:
    """The inbox page of one run, valid for ``seconds``."""
    if not api_url or ring is None:
        return None
    capability = links.Capability(links.Scope(runs=(run_id,)), int(clock.now() + seconds), subject)
    return links.inbox_url(api_url, ring.sign(capability))


def post_webhook(url: str, text: str, opener: Callable[..., Any] = urllib.request.urlopen) -> bool:
    """POST ``{"text": text}`` to a chat webhook; False (logged) when it fails. Never raises."""
    host = urlsplit(url).hostname or "?"
    try:
        request = urllib.request.Request(url, data=json.dumps({"text": text}).encode(), headers={"Content-Type": "application/json"}, method="POST")
        with opener(request, timeout=WEBHOOK_TIMEOUT_SECONDS) as response:
            response.read(1024)
        return True
    except Exception as exc:  # noqa: BLE001 - a chat outage must not block the run's request
        _log("approval webhook failed", webhook_host=host, error=type(exc).__name__)
        return False


def with_link(message: dict[str, Any], link: str | None) -> dict[str, Any]:
    """A ``notification`` message with the decision page's link added to both texts."""
    if not link:
        return message
    bodies = json.loads(message["Message"])
    bodies["email"] = f"Decide in a browser: {link}\n\n{bodies['email']}"
    bodies["default"] = json.dumps({**json.loads(bodies["default"]), "decision_url": link})
    return {**message, "Message": json.dumps(bodies)}


def publisher(
    sns: Any, settings: ApprovalSettings, environ: Mapping[str, str] | None = None, opener: Callable[..., Any] = urllib.request.urlopen
) -> Callable[[dict[str, Any]], None] | None:
    """A ``notify`` for ``requests.request``: the topic and the webhook, each with the decision
    page's link; None when neither is configured.

    Args:
        sns: an SNS client.
        settings: the approval settings (topic, API URL).
        environ: the function's environment (default: ``longstep.environment``): the link key's
            secret and the webhook.
        opener: ``urllib.request.urlopen`` (tests replace it).
    """
    source = environment.environ() if environ is None else environ
    webhook = source.get(ENV_APPROVAL_WEBHOOK_URL, "").strip()
    topic = settings.topic_arn
    if not topic and not webhook:
        return None

    def publish(request_view: dict[str, Any]) -> None:
        link = decision_link(settings.api_url, _keys(source), request_view)
        if topic:
            sns.publish(TopicArn=topic, **with_link(notification(request_view, settings.api_url), link))
        if webhook:
            what = f"{request_view['summary']} ({request_view['tool']})" if request_view.get("summary") else request_view["tool"]
            text = f"Approval needed: {what} in run {request_view['run_id']} (until {request_view['expires_at']})."
            answer = f"Decide: {link}" if link else f"Decide with: longstep approve {request_view['approval_id']}"
            post_webhook(webhook, f"{text} {answer}", opener)

    return publish


def notify_escalation(
    sns: Any, escalation: dict[str, Any], environ: Mapping[str, str] | None = None, opener: Callable[..., Any] = urllib.request.urlopen
) -> None:
    """Tell approvers a step waits for a human (``run_id``, ``turn``, ``task``, ``error``, ``reason``),
    with the link to its run's inbox.

    Failures are logged, never raised: the escalation stands and can be listed.
    """
    source = environment.environ() if environ is None else environ
    topic = source.get(env.ENV_APPROVAL_TOPIC_ARN, "").strip()
    webhook = source.get(ENV_APPROVAL_WEBHOOK_URL, "").strip()
    if not topic and not webhook:
        return
    link = run_inbox_link(source.get(env.ENV_APPROVAL_API_URL, "").strip() or None, _keys(source), escalation["run_id"])
    text = (
        f"Run {escalation['run_id']} needs a human: {escalation['task']} of turn {escalation['turn']} failed "
        f"({escalation['error']}: {str(escalation.get('reason', ''))[:500]})."
    )
    answer = f"Open: {link}" if link else f"Answer with: longstep resolve {escalation['run_id']} {escalation['turn']} --retry | --skip JSON | --abort"
    if topic:
        try:
            sns.publish(
                TopicArn=topic,
                Subject=f"Escalation in run {escalation['run_id']}".encode("ascii", "replace").decode()[:100],
                Message=json.dumps({"default": json.dumps({**escalation, "inbox_url": link}), "email": f"{text}\n\n{answer}"}),
                MessageStructure="json",
                MessageAttributes={"run_id": {"DataType": "String", "StringValue": escalation["run_id"]}},
            )
        except Exception as exc:  # noqa: BLE001 - the escalation is parked; it can be listed
            _log("escalation notification failed", run_id=escalation["run_id"], error=type(exc).__name__)
    if webhook:
        post_webhook(webhook, f"{text} {answer}", opener)
