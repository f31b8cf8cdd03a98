"""Lambda handler: the state machine's ContinueAsNew task (`longstep.loop.continue_as_new`)."""

from longstep.agents import resolve_agent
from longstep import loop
from longstep.handler import handle


def lambda_handler(event, context):
    return handle(loop.continue_as_new, event, context, resolve_agent)
