"""Stateful resources: the checkpoint and idempotency tables and the artifacts bucket."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_s3 as s3
from constructs import Construct

from longstep import keys


def table_from_schema(scope: Construct, cid: str, schema: keys.TableSchema, removal: RemovalPolicy) -> dynamodb.Table:
    """A pay-per-request, encrypted table with point-in-time recovery, keyed by ``schema``."""
    return dynamodb.Table(
        scope,
        cid,
        partition_key=dynamodb.Attribute(name=schema.partition_key, type=dynamodb.AttributeType.STRING),
        sort_key=dynamodb.Attribute(name=schema.sort_key, type=dynamodb.AttributeType.STRING) if schema.sort_key else None,
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        encryption=dynamodb.TableEncryption.AWS_MANAGED,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(point_in_time_recovery_enabled=True),
        time_to_live_attribute=schema.ttl_attribute,
        removal_policy=removal,
    )


class DurableStorage(Construct):
    """Where runs live: checkpoints, execution locks and offloaded artifacts.

    Args:
        destroy_on_delete: delete the data with the stack (sandboxes); retained otherwise.
    """

    def __init__(self, scope: Construct, cid: str, *, destroy_on_delete: bool = False) -> None:
        super().__init__(scope, cid)
        removal = RemovalPolicy.DESTROY if destroy_on_delete else RemovalPolicy.RETAIN
        self.checkpoints = table_from_schema(self, "Checkpoints", keys.checkpoint_table(), removal)
        self.idempotency = table_from_schema(self, "Idempotency", keys.idempotency_table(), removal)
        self.artifacts = s3.Bucket(
            self,
            "Artifacts",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            versioned=False,
            removal_policy=removal,
        )


class SampleWorld(Construct):
    """The triage agent's world: documents, tickets and an outbox of sent emails."""

    def __init__(self, scope: Construct, cid: str, *, destroy_on_delete: bool = False) -> None:
        super().__init__(scope, cid)
        removal = RemovalPolicy.DESTROY if destroy_on_delete else RemovalPolicy.RETAIN
        self.documents = table_from_schema(self, "Documents", keys.documents_table(), removal)
        self.tickets = table_from_schema(self, "Tickets", keys.tickets_table(), removal)
        self.outbox = table_from_schema(self, "Outbox", keys.outbox_table(), removal)
