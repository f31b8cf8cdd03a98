"""Lambda handler: the state machine's WaitForEvent task (`longstep.tasks.wait_for_event.wait_for_event`)."""

from longstep.agents import resolve_agent
from longstep.tasks.wait_for_event import wait_for_event
from longstep.handler import handle


def lambda_handler(event, context):
    return handle(wait_for_event, event, context, resolve_agent)
