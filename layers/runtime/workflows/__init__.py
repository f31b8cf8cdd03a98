"""Code-defined durable workflows, executed by replay over the checkpoint log (docs/workflows.md)."""

from longstep.errors import NonDeterminismError
from longstep.tools.registry import Effect
from longstep.workflows.context import Call, StepFailedError, StepInfo, WorkflowContext
from longstep.workflows.definition import Workflow, WorkflowCatalog

__all__ = ["Call", "Effect", "NonDeterminismError", "StepFailedError", "StepInfo", "Workflow", "WorkflowCatalog", "WorkflowContext"]
