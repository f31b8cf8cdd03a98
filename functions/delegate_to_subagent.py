"""Lambda handler: the state machine's DelegateToSubagent task (`longstep.tasks.subagents.delegate`)."""

from longstep.agents import resolve_agent
from longstep.handler import handle
from longstep.tasks.subagents import delegate


def lambda_handler(event, context):
    return handle(delegate, event, context, resolve_agent)
