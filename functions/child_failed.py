"""Lambda handler: the state machine's ChildFailed tasks (the TellParent states: `longstep.tasks.child_failed.child_failed`)."""

from longstep.agents import resolve_agent
from longstep.handler import handle
from longstep.tasks.child_failed import child_failed


def lambda_handler(event, context):
    return handle(child_failed, event, context, resolve_agent)
