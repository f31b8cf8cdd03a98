"""A durable agent: the loop's Lambda functions and the Standard state machine that drives them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from aws_cdk import ArnFormat, Duration, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.constructs.agent_loop import LoopFunctions, build_definition
from infra.constructs.runtime_layer import LAMBDA_RUNTIME
from longstep import settings as env

FUNCTIONS_DIR = Path(__file__).resolve().parent.parent.parent / "functions"


@dataclass(frozen=True)
class DurableAgentProps:
    """What a durable agent needs.

    Attributes:
        layer: the runtime layer.
        checkpoints: the checkpoint table.
        idempotency: the idempotency (lock) table.
        artifacts: the artifacts bucket.
        world_tables: tables the tools use, by the environment variable that names them.
        model_id: default Bedrock model id.
        max_turns: default turn limit.
        offload_threshold_bytes: tool outputs above this go to S3.
        retention_days: TTL of checkpoint records.
        approval_timeout: how long an approval may wait.
        map_max_concurrency: parallel tool calls per turn.
        memory_mb: Lambda memory.
        model_timeout: ModelTurn function timeout.
        tool_timeout: CallTool function timeout.
        log_retention: log group retention.
        code_dir: the handlers' directory.
    """

    layer: lambda_.ILayerVersion
    checkpoints: dynamodb.ITable
    idempotency: dynamodb.ITable
    artifacts: s3.IBucket
    world_tables: dict[str, dynamodb.ITable] = field(default_factory=dict)
    model_id: str = env.DEFAULT_MODEL_ID
    max_turns: int = env.DEFAULT_MAX_TURNS
    offload_threshold_bytes: int = env.DEFAULT_OFFLOAD_THRESHOLD_BYTES
    retention_days: int = 90
    approval_timeout: Duration = Duration.days(7)
    map_max_concurrency: int = 10
    memory_mb: int = 512
    model_timeout: Duration = Duration.minutes(5)
    tool_timeout: Duration = Duration.minutes(2)
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH
    code_dir: Path = FUNCTIONS_DIR


class DurableAgent(Construct):
    """Lambda functions for Init, ModelTurn, CallTool, RequestApproval and Finish, and the state machine."""

    def __init__(self, scope: Construct, cid: str, props: DurableAgentProps) -> None:
        super().__init__(scope, cid)
        self.props = props
        environment = {
            env.ENV_CHECKPOINT_TABLE: props.checkpoints.table_name,
            env.ENV_IDEMPOTENCY_TABLE: props.idempotency.table_name,
            env.ENV_ARTIFACT_BUCKET: props.artifacts.bucket_name,
            env.ENV_MODEL_ID: props.model_id,
            env.ENV_MAX_TURNS: str(props.max_turns),
            env.ENV_OFFLOAD_THRESHOLD_BYTES: str(props.offload_threshold_bytes),
            env.ENV_RETENTION_DAYS: str(props.retention_days),
            "POWERTOOLS_SERVICE_NAME": "longstep",
        }
        code = lambda_.Code.from_asset(str(props.code_dir), exclude=["**/__pycache__", "*.pyc"])

        def function(name: str, handler: str, timeout: Duration) -> lambda_.Function:
            log_group = logs.LogGroup(self, f"{name}Logs", retention=props.log_retention)
            fn = lambda_.Function(
                self,
                name,
                runtime=LAMBDA_RUNTIME,
                architecture=lambda_.Architecture.X86_64,
                handler=handler,
                code=code,
                layers=[props.layer],
                memory_size=props.memory_mb,
                timeout=timeout,
                environment=environment,
                log_group=log_group,
                tracing=lambda_.Tracing.ACTIVE,
            )
            props.checkpoints.grant_read_write_data(fn)
            props.idempotency.grant_read_write_data(fn)
            props.artifacts.grant_read_write(fn)
            return fn

        short = Duration.seconds(30)
        self.init_run = function("InitRun", "init_run.lambda_handler", short)
        self.model_turn = function("ModelTurn", "model_turn.lambda_handler", props.model_timeout)
        self.call_tool = function("CallTool", "call_tool.lambda_handler", props.tool_timeout)
        self.request_approval = function("RequestApproval", "request_approval.lambda_handler", short)
        self.finish = function("Finish", "finish.lambda_handler", short)
        for name, table in props.world_tables.items():  # only the tools touch the world
            table.grant_read_write_data(self.call_tool)
            self.call_tool.add_environment(name, table.table_name)
        stack = Stack.of(self)
        self.model_turn.add_to_role_policy(
            iam.PolicyStatement(
                actions=["bedrock:InvokeModel"],
                resources=[
                    stack.format_arn(service="bedrock", account="", resource="foundation-model", resource_name="*"),
                    stack.format_arn(service="bedrock", resource="inference-profile", resource_name="*"),
                ],
            )
        )
        definition = build_definition(
            Construct(self, "Loop"),
            LoopFunctions(self.init_run, self.model_turn, self.call_tool, self.request_approval, self.finish),
            approval_timeout=props.approval_timeout,
            max_concurrency=props.map_max_concurrency,
        )
        sm_logs = logs.LogGroup(self, "StateMachineLogs", retention=props.log_retention)
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            definition_body=sfn.DefinitionBody.from_chainable(definition),
            state_machine_type=sfn.StateMachineType.STANDARD,
            tracing_enabled=True,
            logs=sfn.LogOptions(destination=sm_logs, level=sfn.LogLevel.ERROR, include_execution_data=False),
        )
        # A retried RequestApproval hands an already-recorded decision to its new task token.
        # Granting on the state machine itself would make a cycle (function -> policy -> state
        # machine -> function), so the grant names the account's state machines.
        self.request_approval.add_to_role_policy(
            iam.PolicyStatement(
                actions=["states:SendTaskSuccess", "states:SendTaskFailure", "states:SendTaskHeartbeat"],
                resources=[
                    stack.format_arn(
                        service="states",
                        resource="stateMachine",
                        resource_name="*",
                        arn_format=ArnFormat.COLON_RESOURCE_NAME,
                    )
                ],
            )
        )
