"""One agent's declared resources (``longstep.resources``) made real: its tables created, and its
grants bound to the functions that run its tool code, and to no other function."""

from __future__ import annotations

from typing import Sequence

from aws_cdk import Acknowledgment, ArnFormat, RemovalPolicy, Stack, Validations
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from longstep.resources import ENV_AGENT, READ_ITEM_ACTIONS, SCAN_ACTIONS, Grant, Resource, Secret, Table
from longstep_kit.constructs.storage import table_from_schema

SECRET_ACTIONS = ("secretsmanager:GetSecretValue",)


class AgentResources(Construct):
    """The tables an agent declares, and what its tool functions may do.

    Args:
        agent: the agent's name (what start inputs put in ``agent``).
        declarations: the agent's ``resources``.
        destroy_on_delete: delete its tables with the stack (sandboxes); retained otherwise.
        encryption_key: the stack's customer-managed key, if any (the tables use it).
        catalog_secrets: names of the declared secrets the agent's MCP servers need: Init, which
            lists the servers' tools when a run starts, may read these too (``bind_catalog_secrets``).
    """

    def __init__(
        self,
        scope: Construct,
        cid: str,
        *,
        agent: str,
        declarations: Sequence[Resource],
        destroy_on_delete: bool = False,
        encryption_key: kms.IKey | None = None,
        catalog_secrets: Sequence[str] = (),
    ) -> None:
        super().__init__(scope, cid)
        self.agent = agent
        self.declarations = tuple(declarations)
        self.catalog_secrets = tuple(catalog_secrets)
        removal = RemovalPolicy.DESTROY if destroy_on_delete else RemovalPolicy.RETAIN
        self.tables: dict[str, dynamodb.Table] = {
            item.name: table_from_schema(self, f"Table-{item.name}", item.schema(), removal, encryption_key)
            for item in self.declarations
            if isinstance(item, Table)
        }

    def bind(self, fn: lambda_.Function) -> None:
        """Give ``fn`` (a function running this agent's tool code) the agent's name, each resource's
        variable and exactly the declared actions."""
        fn.add_environment(ENV_AGENT, self.agent)
        for item in self.declarations:
            if isinstance(item, Table):
                table = self.tables[item.name]
                table.grant(fn, *item.actions)
                fn.add_environment(item.variable, table.table_name)
            elif isinstance(item, Grant):
                fn.add_to_role_policy(iam.PolicyStatement(actions=list(item.actions), resources=list(item.resources)))
            elif isinstance(item, Secret):
                fn.add_environment(item.variable, item.secret_id)
                grant_secret_read(fn, item.secret_id, f"Agent {self.agent} declares")

    def bind_reads(self, fn: lambda_.Function) -> None:
        """Give ``fn`` (the agent's own ModelTurn, which runs its read tools inline:
        ``Agent.inline_read_tools``; the agent's CallToolEval, an eval run's: docs/evals.md) the
        agent's name and the read part of its declarations:
        each table's declared read actions (none of its writes), its secrets; no ``Grant`` (its
        actions may write: a tool needing one stays in CallTool)."""
        fn.add_environment(ENV_AGENT, self.agent)
        for item in self.declarations:
            if isinstance(item, Table):
                reads = [action for action in item.actions if action in READ_ITEM_ACTIONS + SCAN_ACTIONS]
                fn.add_environment(item.variable, self.tables[item.name].table_name)
                if reads:
                    self.tables[item.name].grant(fn, *reads)
            elif isinstance(item, Secret):
                fn.add_environment(item.variable, item.secret_id)
                grant_secret_read(fn, item.secret_id, f"Agent {self.agent} declares (its inline read tools)")

    def bind_catalog_secrets(self, fn: lambda_.Function) -> None:
        """Give ``fn`` (Init, shared by the agents) read access to the secrets the agent's MCP
        servers need to list their tools, and those only (``longstep.mcp.catalog``)."""
        for item in self.declarations:
            if isinstance(item, Secret) and item.name in self.catalog_secrets:
                fn.add_environment(item.variable, item.secret_id)
                grant_secret_read(fn, item.secret_id, f"Agent {self.agent}'s MCP server lists its tools with")


def grant_secret_read(fn: lambda_.Function, secret_id: str, declared_by: str) -> None:
    """``secretsmanager:GetSecretValue`` on one secret (name or ARN) for ``fn``'s role.

    Args:
        declared_by: who asks for it, for the cdk-nag acknowledgment (``"Agent triage declares"``).
    """
    if secret_id.startswith("arn:"):
        arn = secret_id
    else:
        # Secrets Manager ends a secret's ARN with a hyphen and six random characters, so a secret
        # known by name is granted as name-?????? (the pattern AWS documents for this case):
        # https://docs.aws.amazon.com/secretsmanager/latest/userguide/auth-and-access_iam-policies.html
        arn = Stack.of(fn).format_arn(
            service="secretsmanager", resource="secret", resource_name=f"{secret_id}-??????", arn_format=ArnFormat.COLON_RESOURCE_NAME
        )
        Validations.of(fn.role).acknowledge(
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:secretsmanager:<AWS::Region>:<AWS::AccountId>:secret:{secret_id}-??????]",
                reason=f"{declared_by} the secret {secret_id!r} by name: its ARN's last six "
                "characters are random, so the grant matches them (GetSecretValue on that one secret).",
            )
        )
    fn.add_to_role_policy(iam.PolicyStatement(actions=list(SECRET_ACTIONS), resources=[arn]))
