"""Lambda handler: the state machine's Pause task (`longstep.tasks.pause.pause`)."""

from longstep.agents import resolve_agent
from longstep.handler import handle
from longstep.tasks.pause import pause


def lambda_handler(event, context):
    return handle(pause, event, context, resolve_agent)
