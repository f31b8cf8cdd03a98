"""Lambda handler: the state machine's request_approval task (`longstep.tasks.humans.request_approval`)."""

from longstep.agents import resolve_agent
from longstep.tasks.humans import request_approval
from longstep.handler import handle


def lambda_handler(event, context):
    return handle(request_approval, event, context, resolve_agent)
