"""Which state machine version a run's next execution runs on (continue-as-new under deploys).

Every deploy publishes a state machine version whose definition calls qualified Lambda ARNs
(versions, never ``$LATEST``), and points the alias :data:`ALIAS_NAME` at it. A run started on
the alias keeps the version it started on: each of its executions runs that version's code. At a
continue-as-new boundary the run moves to the alias's current version only when that version
declares the run's recorded code version compatible; otherwise its next execution starts on the
version the run was pinned to, and the run finishes there.

The declaration lives in the version's description (:func:`describe_compatible` writes it at
deploy time from cdk.json ``longstep.compatible_code_versions``; :func:`parse_compatible` reads it
here), so the code deciding (the old version's ContinueAsNew) reads the new deploy's
configuration from Step Functions itself, and nothing else has to be deployed for it.
AWS: an execution started with a version ARN or an alias ARN is associated with that version,
and DescribeExecution returns it as ``stateMachineVersionArn``:
https://docs.aws.amazon.com/step-functions/latest/dg/execution-alias-version-associate.html
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable

# The alias every deploy points at its newest state machine version; runs start on it.
ALIAS_NAME = "live"
_PREFIX = "longstep compatible_code_versions:"
CODE_VERSION = re.compile(r"^[0-9a-f]{16}$")


def describe_compatible(code_versions: Iterable[str]) -> str:
    """A state machine version's description declaring ``code_versions`` compatible with it."""
    return f"{_PREFIX} {','.join(sorted(set(code_versions))) or 'none'}"


def parse_compatible(description: str | None) -> frozenset[str]:
    """The code versions a version's description declares compatible (none for any other text)."""
    if not description or not description.startswith(_PREFIX):
        return frozenset()
    return frozenset(v for v in description[len(_PREFIX) :].strip().split(",") if CODE_VERSION.match(v))


def unqualified(state_machine_arn: str) -> str:
    """``arn:aws:states:r:a:stateMachine:name[:qualifier]`` -> the ARN without its qualifier."""
    parts = state_machine_arn.split(":")
    return ":".join(parts[:7])


def alias_arn(state_machine_arn: str) -> str:
    """The ARN of the deploy alias of a state machine (given any of its ARNs)."""
    return f"{unqualified(state_machine_arn)}:{ALIAS_NAME}"


def execution_arn(state_machine_arn: str, execution_name: str) -> str:
    """The ARN of execution ``execution_name`` of a state machine (given any of its ARNs)."""
    return f"{unqualified(state_machine_arn).replace(':stateMachine:', ':execution:', 1)}:{execution_name}"


def running_version(sfn: Any, state_machine_arn: str, execution_name: str) -> str:
    """The state machine version an execution runs (the unqualified ARN when it runs none).

    DescribeExecution names the version an execution started on a version or alias ARN is
    associated with: https://docs.aws.amazon.com/step-functions/latest/dg/execution-alias-version-associate.html
    """
    described = sfn.describe_execution(executionArn=execution_arn(state_machine_arn, execution_name))
    return described.get("stateMachineVersionArn") or unqualified(state_machine_arn)


@dataclass(frozen=True)
class NextVersion:
    """Where a run's next execution starts, and why.

    Attributes:
        arn: the ARN to start it on (a version ARN, or the unqualified ARN of an unpinned run).
        moved: the run moves to newer code than its current execution's.
        reason: one line for logs and the execution's input.
    """

    arn: str
    moved: bool
    reason: str


def next_version(sfn: Any, state_machine_arn: str, execution_arn: str | None, code_version: str | None) -> NextVersion:
    """Choose the state machine version of the run's next execution.

    Args:
        sfn: a Step Functions client.
        state_machine_arn: ``$$.StateMachine.Id`` of the current execution.
        execution_arn: ``$$.Execution.Id`` of the current execution (None: not pinned).
        code_version: the run's recorded code version (None: recorded before versions were).
    """
    if execution_arn is None:
        return NextVersion(state_machine_arn, False, "the execution names no version: unpinned")
    current = sfn.describe_execution(executionArn=execution_arn).get("stateMachineVersionArn")
    if not current:  # started on the unqualified ARN: the latest revision, as before pinning
        return NextVersion(unqualified(state_machine_arn), False, "started unqualified: unpinned")
    routes = sfn.describe_state_machine_alias(stateMachineAliasArn=alias_arn(current))["routingConfiguration"]
    target = max(routes, key=lambda r: r["weight"])["stateMachineVersionArn"]
    if target == current:
        return NextVersion(current, False, "the alias still points at the run's version")
    accepted = parse_compatible(sfn.describe_state_machine(stateMachineArn=target).get("description"))
    if code_version is not None and code_version in accepted:
        return NextVersion(target, True, f"code version {code_version} is declared compatible with {target}")
    return NextVersion(current, False, f"code version {code_version} is not declared compatible with {target}: pinned")
