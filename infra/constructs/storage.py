"""Stateful resources: the checkpoint, idempotency and approvals tables, the artifacts bucket and an optional KMS key."""

from __future__ import annotations

from aws_cdk import Acknowledgment, ArnFormat, RemovalPolicy, Stack, Validations
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from longstep import keys


def table_from_schema(scope: Construct, cid: str, schema: keys.TableSchema, removal: RemovalPolicy, key: kms.IKey | None = None) -> dynamodb.Table:
    """A pay-per-request, encrypted table with point-in-time recovery, keyed by ``schema``.

    Args:
        key: a customer-managed key to encrypt with; an AWS-managed key when None.
    """
    table = dynamodb.Table(
        scope,
        cid,
        partition_key=dynamodb.Attribute(name=schema.partition_key, type=dynamodb.AttributeType.STRING),
        sort_key=dynamodb.Attribute(name=schema.sort_key, type=dynamodb.AttributeType.STRING) if schema.sort_key else None,
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED if key else dynamodb.TableEncryption.AWS_MANAGED,
        encryption_key=key,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(point_in_time_recovery_enabled=True),
        time_to_live_attribute=schema.ttl_attribute,
        removal_policy=removal,
    )
    for index in schema.indexes:
        table.add_global_secondary_index(
            index_name=index.name,
            partition_key=dynamodb.Attribute(name=index.partition_key, type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name=index.sort_key, type=dynamodb.AttributeType.STRING) if index.sort_key else None,
            projection_type=dynamodb.ProjectionType.ALL if index.projected is None else dynamodb.ProjectionType.INCLUDE,
            non_key_attributes=list(index.projected) if index.projected is not None else None,
        )
    return table


class DurableStorage(Construct):
    """Where runs live: checkpoints, execution locks, approval requests and offloaded artifacts.

    Args:
        destroy_on_delete: delete the data with the stack (sandboxes); retained otherwise.
        customer_managed_key: create one KMS key (``key``) for the tables, the bucket and, through
            the stack, the log groups; otherwise ``key`` is None and AWS-managed keys are used.
    """

    def __init__(self, scope: Construct, cid: str, *, destroy_on_delete: bool = False, customer_managed_key: bool = False) -> None:
        super().__init__(scope, cid)
        removal = RemovalPolicy.DESTROY if destroy_on_delete else RemovalPolicy.RETAIN
        self.key: kms.Key | None = None
        if customer_managed_key:
            self.key = kms.Key(
                self,
                "Key",
                description="Longstep: checkpoints, locks, artifacts and logs",
                enable_key_rotation=True,
                removal_policy=removal,
            )
            # CloudWatch Logs encrypts a log group with the key on its own behalf, so the key
            # policy (not an IAM policy) must allow it: only for this account's log groups here.
            stack = Stack.of(self)
            self.key.add_to_resource_policy(
                iam.PolicyStatement(
                    principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],
                    actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
                    resources=["*"],
                    conditions={
                        "ArnLike": {
                            "kms:EncryptionContext:aws:logs:arn": stack.format_arn(
                                service="logs", resource="log-group", resource_name="*", arn_format=ArnFormat.COLON_RESOURCE_NAME
                            )
                        }
                    },
                )
            )
        self.checkpoints = table_from_schema(self, "Checkpoints", keys.checkpoint_table(), removal, self.key)
        self.idempotency = table_from_schema(self, "Idempotency", keys.idempotency_table(), removal, self.key)
        # Approval requests (longstep.humans): their own table, listed by status through an index.
        self.approvals = table_from_schema(self, "Approvals", keys.approvals_table(), removal, self.key)
        # Long-term memory outlives runs (longstep.memory): a table of its own.
        self.memory = table_from_schema(self, "Memory", keys.memory_table(), removal, self.key)
        self.artifacts = s3.Bucket(
            self,
            "Artifacts",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.KMS if self.key else s3.BucketEncryption.S3_MANAGED,
            encryption_key=self.key,
            # A bucket key cuts the KMS requests of many small artifact writes to a few.
            bucket_key_enabled=True if self.key else None,
            enforce_ssl=True,
            versioned=False,
            removal_policy=removal,
        )
        Validations.of(self.artifacts).acknowledge(
            Acknowledgment(
                id="AwsSolutions-S1",
                reason="Artifacts are private, TLS-only and reachable only by the agent's function roles; "
                "object-level audit is CloudTrail S3 data events, not a second retained log bucket.",
            )
        )

    def allow_event_delivery(self) -> None:
        """Let EventBridge use the key for a rule target's dead-letter queue (encrypted with it).

        EventBridge sends a failed event to an SSE-KMS queue only if the key policy allows
        ``events.amazonaws.com`` to ``kms:GenerateDataKey`` and ``kms:Decrypt``
        (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-dlq.html), here for this
        account's rules (the rule's ARN in the condition would make a dependency cycle: the rule's
        target function's log group is encrypted with this key).
        """
        if self.key is None:
            return
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("events.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey"],
                resources=["*"],
                conditions={"StringEquals": {"aws:SourceAccount": Stack.of(self).account}},
            )
        )
