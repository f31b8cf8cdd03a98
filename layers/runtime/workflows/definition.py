"""What a workflow is, and how a deployment finds its workflows.

A workflow is a Python function ``fn(ctx, input)`` written against a
:class:`~longstep.workflows.context.WorkflowContext`. The project registers a builder for it
beside its agents (cdk.json ``longstep.workflows``: name -> ``"module:callable"``); the
callable returns a :class:`Workflow`. The stack writes the registrations into
``LONGSTEP_WORKFLOWS`` of the workflow function, as it writes ``LONGSTEP_AGENTS``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from longstep import environment
from longstep.errors import UnknownWorkflowError
from longstep.references import ReferenceCatalog, import_callable, parse_references
from longstep.resources import Resource
from longstep.settings import ENV_PASSES_PER_EXECUTION as ENV_PASSES_PER_EXECUTION, ENV_WORKFLOWS

DEFAULT_PASSES_PER_EXECUTION = 1_000

WorkflowFn = Callable[[Any, dict[str, Any]], Any]


@dataclass(frozen=True)
class Workflow:
    """A workflow function and what it needs.

    Attributes:
        fn: ``fn(ctx, input) -> output``; ``input`` is the start input's ``input`` object and the
            return value (JSON) is the run's output.
        resources: tables, grants and secrets its steps use (``longstep.resources``), bound to
            the workflow's function only.
        description: one line for listings.
    """

    fn: WorkflowFn
    resources: Sequence[Resource] = ()
    description: str = ""

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise TypeError(f"Workflow.fn: expected a function, got {type(self.fn).__name__}")


def parse_workflows(raw: str | None) -> dict[str, str]:
    """The workflow references in a ``LONGSTEP_WORKFLOWS`` value.

    Raises:
        SettingsError: not a JSON object of names to ``module:callable`` strings.
    """
    return parse_references(raw, ENV_WORKFLOWS)


def load_workflow(reference: str) -> Workflow:
    """Import ``module:callable`` and build the workflow it returns.

    Raises:
        UnknownWorkflowError: the module or callable is missing, or it returns no Workflow.
    """
    built = import_callable(reference, "workflow", UnknownWorkflowError)()
    if not isinstance(built, Workflow):
        attr = reference.partition(":")[2]
        raise UnknownWorkflowError(f"workflow {reference!r}: {attr}() returned {type(built).__name__}, not a Workflow")
    return built


class WorkflowCatalog(ReferenceCatalog[Workflow]):
    """Finds workflows by the name start inputs use (each built once per process).

    Args:
        references: workflow name -> ``"module:callable"``.
    """

    kind = "workflow"
    error = UnknownWorkflowError
    build = staticmethod(load_workflow)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "WorkflowCatalog":
        """The catalog ``LONGSTEP_WORKFLOWS`` describes (this invocation's environment by default)."""
        env = environment.environ() if environ is None else environ
        return cls(parse_workflows(env.get(ENV_WORKFLOWS)))
