"""Lambda handler: the state machine's RequestApproval task (`longstep.tasks.request_approval.request_approval`)."""

from longstep.agents import resolve_agent
from longstep.tasks.request_approval import request_approval
from longstep.handler import handle


def lambda_handler(event, context):
    return handle(request_approval, event, context, resolve_agent)
