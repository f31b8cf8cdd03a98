"""Reusable constructs: they take typed props and read no context or environment.

The public API is what this module exports (``from longstep_kit.constructs import DurableAgent,
DurableAgentProps, ...``); each name is loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from longstep.exports import lazy_exports

_EXPORTS: dict[str, str | None] = {
    "DurableAgent": "longstep_kit.constructs.durable_agent",
    "DurableAgentProps": "longstep_kit.constructs.durable_agent_props",
    "DurableWorkflow": "longstep_kit.constructs.durable_workflow",
    "DurableWorkflowProps": "longstep_kit.constructs.durable_workflow",
    "DurableStorage": "longstep_kit.constructs.storage",
    "RuntimeLayer": "longstep_kit.constructs.runtime_layer",
    "AgentResources": "longstep_kit.constructs.agent_resources",
    "ApprovalApi": "longstep_kit.constructs.approval_api",
    "ApprovalApiProps": "longstep_kit.constructs.approval_api",
    "ApprovalNotifications": "longstep_kit.constructs.approval_api",
    "ApprovalNotificationsProps": "longstep_kit.constructs.approval_api",
    "AgentObservability": "longstep_kit.constructs.observability",
    "AgentObservabilityProps": "longstep_kit.constructs.observability",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


if TYPE_CHECKING:
    from longstep_kit.constructs.agent_resources import AgentResources  # noqa: F401
    from longstep_kit.constructs.approval_api import ApprovalApi, ApprovalApiProps, ApprovalNotifications, ApprovalNotificationsProps  # noqa: F401
    from longstep_kit.constructs.durable_agent import DurableAgent  # noqa: F401
    from longstep_kit.constructs.durable_agent_props import DurableAgentProps  # noqa: F401
    from longstep_kit.constructs.durable_workflow import DurableWorkflow, DurableWorkflowProps  # noqa: F401
    from longstep_kit.constructs.observability import AgentObservability, AgentObservabilityProps  # noqa: F401
    from longstep_kit.constructs.runtime_layer import RuntimeLayer  # noqa: F401
    from longstep_kit.constructs.storage import DurableStorage  # noqa: F401
