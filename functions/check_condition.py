"""Lambda handler: the state machine's CheckCondition task (`longstep.tasks.check_condition.check_condition`)."""

from longstep.agents import resolve_agent
from longstep.tasks.check_condition import check_condition
from longstep.handler import handle


def lambda_handler(event, context):
    return handle(check_condition, event, context, resolve_agent)
