"""Lambda handler: the state machine's call_tool task (`longstep.loop.call_tool`)."""

from longstep.agents import resolve_agent
from longstep import loop
from longstep.handler import handle


def lambda_handler(event, context):
    return handle(loop.call_tool, event, context, resolve_agent)
