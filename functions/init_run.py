"""Lambda handler: the state machine's Init task (function InitRun) (`longstep.tasks.init_run.start_run`)."""

from longstep.agents import resolve_agent
from longstep.tasks.init_run import start_run
from longstep.handler import handle


def lambda_handler(event, context):
    return handle(start_run, event, context, resolve_agent)
