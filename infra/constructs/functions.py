"""One way to build a Longstep Lambda function: its own role and log group, the runtime layer,
active tracing, and the cdk-nag findings every such function shares acknowledged with reasons."""

from __future__ import annotations

import json
from pathlib import Path

from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from longstep_kit.constructs.runtime_layer import LAMBDA_RUNTIME


def runtime_function(
    scope: Construct,
    name: str,
    *,
    handler: str,
    code: lambda_.Code,
    layer: lambda_.ILayerVersion,
    memory_mb: int,
    timeout: Duration,
    environment: dict[str, str],
    log_retention: logs.RetentionDays,
    encryption_key: kms.IKey | None,
    no_dlq_reason: str | None = None,
    dead_letters: sqs.IQueue | None = None,
) -> lambda_.Function:
    """A function named ``name`` in ``scope`` (with ``<name>Logs`` and ``<name>Role`` beside it).

    Args:
        no_dlq_reason: why the function needs no dead-letter queue (acknowledged for cdk-nag);
            give it unless ``dead_letters`` is set.
    """
    log_group = logs.LogGroup(scope, f"{name}Logs", retention=log_retention, encryption_key=encryption_key)
    # An explicit role instead of AWSLambdaBasicExecutionRole, which may write to every log group.
    role = iam.Role(scope, f"{name}Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    fn = lambda_.Function(
        scope,
        name,
        role=role,
        runtime=LAMBDA_RUNTIME,
        architecture=lambda_.Architecture.X86_64,
        handler=handler,
        code=code,
        layers=[layer],
        memory_size=memory_mb,
        timeout=timeout,
        environment=environment,
        log_group=log_group,
        tracing=lambda_.Tracing.ACTIVE,
        dead_letter_queue=dead_letters,
        # ``fn.current_version`` (used by the state machines that pin their code) publishes a
        # version per deploy that changes the function; old ones are kept, since executions
        # started on an older state machine version still call them (docs/deploy.md "Pinning").
        current_version_options=lambda_.VersionOptions(removal_policy=RemovalPolicy.RETAIN),
    )
    log_group.grant_write(role)
    Validations.of(role).acknowledge(
        Acknowledgment(
            id="AwsSolutions-IAM5[Resource::*]",
            reason="Active tracing: xray:PutTraceSegments and xray:PutTelemetryRecords accept no resource but *.",
        )
    )
    latest = (
        f"The runtime layer's compiled wheels (pydantic-core) are built for {LAMBDA_RUNTIME.name} "
        "(``longstep_kit.bundling``): the functions and the layer change runtime together."
    )
    findings = [
        Acknowledgment(id="AwsSolutions-L1", reason=latest),
        Acknowledgment(id="Serverless-LambdaLatestVersion", reason=latest),
    ]
    if dead_letters is None and no_dlq_reason:
        findings.append(Acknowledgment(id="Serverless-LambdaDLQ", reason=no_dlq_reason))
    Validations.of(fn).acknowledge(*findings)
    return fn


def function_code(directory: Path | None) -> lambda_.Code:
    """The functions' code asset: the Lambda entry points (``longstep_functions``) and the agents' code.

    Raises:
        ValueError: no directory was given.
    """
    if directory is None:
        raise ValueError("function_code_dir: the directory of the functions' code is required")
    return lambda_.Code.from_asset(str(directory), exclude=[".complete", "**/__pycache__", "*.pyc"])


def agents_variable(agents: dict[str, str]) -> str:
    """The value of ``LONGSTEP_AGENTS`` (read back by ``longstep.agents``)."""
    return json.dumps(agents, sort_keys=True, separators=(",", ":"))
