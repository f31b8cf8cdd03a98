"""Lambda handler: the state machine's Escalate task (`longstep.loop.escalate`)."""

from longstep.agents import resolve_agent
from longstep import loop
from longstep.handler import handle


def lambda_handler(event, context):
    return handle(loop.escalate, event, context, resolve_agent)
