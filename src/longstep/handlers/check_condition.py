"""Lambda handler: the state machine's CheckCondition task (`longstep.loop.check_condition`)."""

from longstep.agents import resolve_agent
from longstep import loop
from longstep.handler import handle


def lambda_handler(event, context):
    return handle(loop.check_condition, event, context, resolve_agent)
