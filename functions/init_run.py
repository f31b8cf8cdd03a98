"""Lambda handler: the state machine's init_run task (`longstep.tasks.start.start_run`)."""

from longstep.agents import resolve_agent
from longstep.tasks.start import start_run
from longstep.handler import handle


def lambda_handler(event, context):
    return handle(start_run, event, context, resolve_agent)
