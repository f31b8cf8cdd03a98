"""Lambda handler: the state machine's Escalate task (`longstep.tasks.escalate.escalate`)."""

from longstep.agents import resolve_agent
from longstep.tasks.escalate import escalate
from longstep.handler import handle


def lambda_handler(event, context):
    return handle(escalate, event, context, resolve_agent)
