"""Lambda handler: the workflow state machine's tasks (`longstep.workflows.tasks`).

One function serves both: ``{"action": "park" | "escalate", "state": ..., "token": ...}`` parks
a wait (or a failed step) on its task token; ``{"action": "continue", ...}`` hands the run to a
new execution; any other event is a state to advance by one pass.
"""

from longstep.agents import resolve_agent
from longstep.handler import handle
from longstep.workflows.definition import WorkflowCatalog
from longstep.workflows.tasks import advance as _advance
from longstep.workflows.tasks import hand_over, park


def advance(rt, event):
    return _advance(rt, event, WorkflowCatalog.from_env())


def lambda_handler(event, context):
    action = event.get("action") if isinstance(event, dict) else None
    step = park if action in ("park", "escalate") else hand_over if action == "continue" else advance
    return handle(step, event, context, resolve_agent)
