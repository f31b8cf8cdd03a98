"""Lambda handler: the state machine's CallTool task (`longstep.tasks.call_tool.call_tool`)."""

from longstep.agents import resolve_agent
from longstep.tasks.call_tool import call_tool
from longstep.handler import handle


def lambda_handler(event, context):
    return handle(call_tool, event, context, resolve_agent)
