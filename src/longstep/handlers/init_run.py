"""Lambda handler: the state machine's init_run task (`longstep.loop.start_run`)."""

from longstep.agents import resolve_agent
from longstep import loop
from longstep.handler import handle


def lambda_handler(event, context):
    return handle(loop.start_run, event, context, resolve_agent)
