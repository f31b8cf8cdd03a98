"""How a run's executions are named: the run id, then ``<run id>--g<N>`` for each later one.

Continue-as-new (a Lambda of the loop) and the operator tools (resume, views) both need this.
"""

from __future__ import annotations

GENERATION_SUFFIX = "--g"


def execution_arn(state_machine_arn: str, name: str) -> str:
    """The ARN of the execution called ``name`` of a state machine."""
    return state_machine_arn.replace(":stateMachine:", ":execution:") + f":{name}"


def generation_name(first_name: str, generation: int) -> str:
    """The execution name of a run's ``generation``: the first execution's name (the run id),
    then ``<name>--g<N>`` for each execution after it (continue-as-new and resumes)."""
    return first_name if generation == 0 else f"{first_name}{GENERATION_SUFFIX}{generation}"


def first_name(execution_name: str) -> str:
    """The name of the first execution of the run an execution called ``execution_name`` belongs to."""
    base, sep, number = execution_name.rpartition(GENERATION_SUFFIX)
    return base if sep and number.isdigit() else execution_name
