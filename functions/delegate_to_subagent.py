"""Lambda handler: the state machine's DelegateToSubagent task (`longstep.tasks.delegate_to_subagent.delegate`)."""

from longstep.agents import resolve_agent
from longstep.handler import handle
from longstep.tasks.delegate_to_subagent import delegate


def lambda_handler(event, context):
    return handle(delegate, event, context, resolve_agent)
