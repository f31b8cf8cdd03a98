"""Lambda handler: the state machine's ContinueAsNew task (`longstep.tasks.continue_as_new.continue_as_new`)."""

from longstep.agents import resolve_agent
from longstep.tasks.continue_as_new import continue_as_new
from longstep.handler import handle


def lambda_handler(event, context):
    return handle(continue_as_new, event, context, resolve_agent)
