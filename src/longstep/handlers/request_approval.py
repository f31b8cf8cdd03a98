"""Lambda handler: the state machine's request_approval task (`longstep.loop.request_approval`)."""

from longstep.agents import resolve_agent
from longstep import loop
from longstep.handler import handle


def lambda_handler(event, context):
    return handle(loop.request_approval, event, context, resolve_agent)
