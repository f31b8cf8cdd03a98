"""Lambda handler: an eval run's CallTool task (`longstep.tasks.call_tool.call_tool_eval`, docs/evals.md),
in a function whose role holds only the agent's reads."""

from longstep.agents import resolve_agent
from longstep.tasks.call_tool import call_tool_eval
from longstep.handler import handle


def lambda_handler(event, context):
    return handle(call_tool_eval, event, context, resolve_agent)
