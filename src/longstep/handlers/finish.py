"""Lambda handler: the state machine's finish task (`longstep.loop.finish`)."""

from longstep.agents import resolve_agent
from longstep import loop
from longstep.handler import handle


def lambda_handler(event, context):
    return handle(loop.finish, event, context, resolve_agent)
