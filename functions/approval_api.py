"""Lambda handlers: the approval API (`longstep.humans.api.handle_http`, API Gateway REST) and
the EventBridge signal rule's target (`longstep.humans.api.handle_signal_event`)."""

from longstep.agents import resolve_agent
from longstep.humans.api import handle_http, handle_signal_event


def lambda_handler(event, context):
    return handle_http(event, context, resolve_agent)


def signal_handler(event, context):
    return handle_signal_event(event, context, resolve_agent)
