"""What a project's tests use: the local stack, scenario runs and their faults, bounded waits, and
the state machine definitions of a synthesized template.

``from longstep_kit.testing import LocalStack, run_scenario, RunOptions, load_scenario, Fault, run_campaign, ...``:
the public API for tests (the projects ``longstep init`` writes use it); each name is loaded on
first use. Nothing here is shipped to Lambda.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from longstep.exports import lazy_exports

_EXPORTS: dict[str, str | None] = {
    "LocalStack": "longstep_kit.local.stack",
    "run_scenario": "longstep_kit.local.runner",
    "RunOptions": "longstep_kit.local.run_options",
    "LocalRunError": "longstep_kit.local.run_options",
    "load_scenario": "longstep_kit.local.scenario",
    "unmet_expectations": "longstep_kit.local.scenario",
    "Fault": "longstep_kit.local.faults",
    "FAULT_POINTS": "longstep_kit.local.campaign",
    "CampaignPlan": "longstep_kit.local.campaign",
    "CampaignResult": "longstep_kit.local.campaign",
    "run_campaign": "longstep_kit.local.campaign",
    "random_faults": "longstep_kit.local.faults",
    "wait_until": "longstep_kit.testing.wait",
    "wait_execution": "longstep_kit.testing.wait",
    "WaitTimeoutError": "longstep_kit.testing.wait",
    "state_machine_definitions": "longstep_kit.testing.asl",
    "all_states": "longstep_kit.testing.asl",
    "agent_tables": "longstep_kit.local.resources",
    "agent_items": "longstep_kit.testing.tables",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


if TYPE_CHECKING:
    from longstep_kit.local.campaign import FAULT_POINTS, CampaignPlan, CampaignResult, run_campaign  # noqa: F401
    from longstep_kit.local.faults import Fault, random_faults  # noqa: F401
    from longstep_kit.local.run_options import LocalRunError, RunOptions  # noqa: F401
    from longstep_kit.local.resources import agent_tables  # noqa: F401
    from longstep_kit.local.runner import run_scenario  # noqa: F401
    from longstep_kit.testing.tables import agent_items  # noqa: F401
    from longstep_kit.local.scenario import load_scenario, unmet_expectations  # noqa: F401
    from longstep_kit.local.stack import LocalStack  # noqa: F401
    from longstep_kit.testing.asl import all_states, state_machine_definitions  # noqa: F401
    from longstep_kit.testing.wait import WaitTimeoutError, wait_execution, wait_until  # noqa: F401
