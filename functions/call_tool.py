"""Lambda handler: the state machine's call_tool task (`longstep.tasks.tool_call.call_tool`)."""

from longstep.agents import resolve_agent
from longstep.tasks.tool_call import call_tool
from longstep.handler import handle


def lambda_handler(event, context):
    return handle(call_tool, event, context, resolve_agent)
