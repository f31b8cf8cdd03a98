"""Naming a resource as cdk-nag names it, so that an acknowledgment names its exact finding."""

from __future__ import annotations

from aws_cdk import Stack
from constructs import Construct


def nag_text(scope: Construct, value: str) -> str:
    """A resource as cdk-nag names it in a finding id: ``<LogicalId.Arn>/*``, ``arn:<AWS::Partition>:...``.

    Acknowledgments name the exact finding, so they are built from the same value the grant uses
    rather than from logical ids copied by hand.
    """

    def render(node: object) -> str:
        if isinstance(node, str):
            return node
        if isinstance(node, dict) and "Ref" in node:
            return f"<{node['Ref']}>"
        if isinstance(node, dict) and "Fn::GetAtt" in node:
            return "<{}.{}>".format(*node["Fn::GetAtt"])
        if isinstance(node, dict) and "Fn::Join" in node:
            separator, parts = node["Fn::Join"]
            return separator.join(render(part) for part in parts)
        raise ValueError(f"cannot name {node!r} as cdk-nag does")

    return render(Stack.of(scope).resolve(value))
