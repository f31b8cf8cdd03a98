"""Lambda handler: the state machine's model_turn task (`longstep.loop.model_turn`)."""

from longstep.agents import resolve_agent
from longstep import loop
from longstep.handler import handle


def lambda_handler(event, context):
    return handle(loop.model_turn, event, context, resolve_agent)
