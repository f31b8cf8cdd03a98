"""Notifications: approvers hear of each request on an SNS topic (the request's view, never its token)."""

from __future__ import annotations

import json
from typing import Any, Callable

from longstep.settings import ApprovalSettings


def log_failed_notification(approval_id: str, exc: Exception) -> None:
    """Log that telling approvers failed (the request stands: approvers can still list it)."""
    from longstep import observability

    observability.logger().warning(
        "approval notification failed", extra={"approval_id": approval_id, "error": type(exc).__name__, "error_message": str(exc)[:500]}
    )


def notification(request_view: dict[str, Any], api_url: str | None = None) -> dict[str, Any]:
    """The SNS message telling approvers about a request (``Subject``, ``Message``, attributes).

    It carries the request's view, never its task token.
    """
    approval_id = request_view["approval_id"]
    lines = [
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


def publisher(sns: Any, settings: ApprovalSettings) -> Callable[[dict[str, Any]], None] | None:
    """A ``notify`` for ``request`` that publishes to the settings' topic; None without a topic."""
    if not settings.topic_arn:
        return None
    topic = settings.topic_arn

    def publish(request_view: dict[str, Any]) -> None:
        sns.publish(TopicArn=topic, **notification(request_view, settings.api_url))

    return publish
