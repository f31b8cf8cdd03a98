"""Lambda handler: the workflow state machine's tasks (`longstep.workflows.tasks`).

One function serves both: ``{"action": "park" | "escalate", "state": ..., "token": ...}`` parks
a wait (or a failed step) on its task token; any other event is a state to advance by one pass.
"""

from longstep.agents import resolve_agent
from longstep.handler import handle
from longstep.workflows.definition import WorkflowCatalog
from longstep.workflows.tasks import advance as _advance
from longstep.workflows.tasks import park


def advance(rt, event):
    return _advance(rt, event, WorkflowCatalog.from_env())


def lambda_handler(event, context):
    step = park if isinstance(event, dict) and event.get("action") in ("park", "escalate") else advance
    return handle(step, event, context, resolve_agent)
