"""The event bus signals arrive on: the kit's own, open only to the principals a deployer names.

On the default bus any principal allowed ``events:PutEvents`` there (most of an account's roles)
could signal any run, and a rule cannot tell who put an event. So signals have a bus of their
own, whose resource policy decides who may put events on it: the principals named in
``longstep.signal_principals`` may put events of source ``SIGNAL_SOURCE``, and an explicit Deny
refuses everyone else, whatever their identity policies allow (an explicit Deny in a resource
policy wins for callers of the same account too:
https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html).
With no principal named, nobody can put events on the bus; the approval API's signal route
(IAM-authorized) still delivers signals.

Condition keys of ``PutEvents`` (``events:source`` is multivalued: one value per entry):
https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-conditions.html
"""

from __future__ import annotations

from typing import Sequence

from aws_cdk import Names, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from constructs import Construct

# The source every signal event carries (the rule matches it and the detail-type both); an
# ``aws.`` prefix is reserved for AWS services.
SIGNAL_SOURCE = "longstep.signal"
PUT_EVENTS = "events:PutEvents"


def signal_bus(scope: Construct, cid: str, principals: Sequence[str]) -> events.EventBus:
    """The signals' bus in ``scope``: ``principals`` (IAM role or user ARNs) alone may put signals on it.

    Its name is derived from ``scope``'s unique id (CloudFormation requires a name for a bus), so
    two stacks never collide; the policy names the bus's ARN from that name (its own ``Arn``
    attribute in its own property would be a circular reference).
    """
    name = f"{Names.unique_id(scope)}{cid}"
    bus = events.EventBus(scope, cid, event_bus_name=name, description=f"Longstep: signals to waiting runs (source {SIGNAL_SOURCE})")
    arn = Stack.of(scope).format_arn(service="events", resource="event-bus", resource_name=name)
    statements = []
    if principals:
        statements.append(
            iam.PolicyStatement(
                sid="NamedPrincipalsSignal",
                principals=[iam.ArnPrincipal(arn) for arn in principals],
                actions=[PUT_EVENTS],
                resources=[arn],
                conditions={"ForAllValues:StringEquals": {"events:source": [SIGNAL_SOURCE]}},
            )
        )
    statements.append(
        iam.PolicyStatement(
            sid="NobodyElseSignals",
            effect=iam.Effect.DENY,
            principals=[iam.AnyPrincipal()],
            actions=[PUT_EVENTS],
            resources=[arn],
            conditions={"ArnNotEquals": {"aws:PrincipalArn": list(principals)}} if principals else None,
        )
    )
    cfn = bus.node.default_child
    assert isinstance(cfn, events.CfnEventBus)
    cfn.policy = iam.PolicyDocument(statements=statements).to_json()
    return bus
