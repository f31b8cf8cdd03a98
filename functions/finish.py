"""Lambda handler: the state machine's Finish task (`longstep.tasks.finish.finish`)."""

from longstep.agents import resolve_agent
from longstep.tasks.finish import finish
from longstep.handler import handle


def lambda_handler(event, context):
    return handle(finish, event, context, resolve_agent)
