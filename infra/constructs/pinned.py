"""A deploy's state machine version and the alias runs start on (pinning; docs/deploy.md "Pinning")."""

from __future__ import annotations

from aws_cdk import ArnFormat, RemovalPolicy, Stack
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from longstep.pinning import ALIAS_NAME


def publish_version(
    scope: Construct, state_machine: sfn.StateMachine, description: str | None = None
) -> tuple[sfn.CfnStateMachineVersion, sfn.CfnStateMachineAlias]:
    """Publish ``state_machine``'s current revision as a version and point the alias ``live`` at it.

    A version is published when the revision changes (a new definition, so new function
    versions); the version resource is then replaced and the old one retained: deleting a version
    does not stop its executions, but they would call the function versions a prune removed
    (``longstep versions prune`` deletes the unused ones).
    https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-resource-stepfunctions-statemachineversion.html

    Args:
        scope: the construct the two resources belong to (ids ``StateMachineVersion``, ``StateMachineAlias``).
        state_machine: the state machine.
        description: the version's description (an agent's declares its compatible code versions).
    """
    version = sfn.CfnStateMachineVersion(
        scope,
        "StateMachineVersion",
        state_machine_arn=state_machine.state_machine_arn,
        state_machine_revision_id=state_machine.state_machine_revision_id,
        description=description,
    )
    version.apply_removal_policy(RemovalPolicy.RETAIN)
    alias = sfn.CfnStateMachineAlias(
        scope,
        "StateMachineAlias",
        name=ALIAS_NAME,
        routing_configuration=[sfn.CfnStateMachineAlias.RoutingConfigurationVersionProperty(state_machine_version_arn=version.attr_arn, weight=100)],
    )
    return version, alias


def executions_arn(state_machine: sfn.StateMachine) -> str:
    """The ARN pattern of every execution of ``state_machine`` (a task reading its own execution
    learns which version it runs: ``longstep.pinning.running_version``)."""
    return Stack.of(state_machine).format_arn(
        service="states", resource="execution", resource_name=f"{state_machine.state_machine_name}:*", arn_format=ArnFormat.COLON_RESOURCE_NAME
    )
