"""Lambda handler: the state machine's FleetGate tasks (AcquireSlot, ReleaseSlot, DrawRate) and the ended-execution rule (`longstep.tasks.fleet_gate.fleet_gate`)."""

from longstep.agents import resolve_agent
from longstep.handler import handle
from longstep.tasks.fleet_gate import fleet_gate


def lambda_handler(event, context):
    return handle(fleet_gate, event, context, resolve_agent)
