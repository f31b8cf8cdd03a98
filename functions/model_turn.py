"""Lambda handler: the state machine's ModelTurn task (`longstep.tasks.model_turn.model_turn`)."""

from longstep.agents import resolve_agent
from longstep.tasks.model_turn import model_turn
from longstep.handler import handle


def lambda_handler(event, context):
    return handle(model_turn, event, context, resolve_agent)
