"""Lambda handler: the state machine's WaitForEvent task (`longstep.loop.wait_for_event`)."""

from longstep.agents import resolve_agent
from longstep import loop
from longstep.handler import handle


def lambda_handler(event, context):
    return handle(loop.wait_for_event, event, context, resolve_agent)
