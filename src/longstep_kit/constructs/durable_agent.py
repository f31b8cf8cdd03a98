"""A durable agent: the loop's Lambda functions and the Standard state machine that drives them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from aws_cdk import Acknowledgment, Duration, Names, Stack, Token, Validations
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from longstep_kit.constructs.agent_loop import AgentTaskFunctions, LoopFunction, LoopFunctions, build_definition, condition_checks_per_execution
from longstep_kit.bedrock_access import invoke_model_resources
from longstep_kit.config import providers_variable
from longstep_kit.constructs.nag import nag_text
from longstep_kit.constructs.pinned import executions_arn, publish_version
from longstep_kit.constructs.loop_access import KEY_USE, LOCK_ACTIONS, ACCESS, Access, access_of
from longstep_kit.constructs.agent_resources import AgentResources, grant_secret_read
from longstep_kit.retry import RetryPolicies
from longstep_kit.constructs.functions import agent_code, agents_variable, runtime_function
from longstep import settings as env
from longstep.artifacts import ARTIFACT_PREFIX
from longstep.models.registry import ENV_MODEL_PROVIDERS
from longstep.tasks.waits import ENV_CONDITION_CHECKS
from longstep.pinning import describe_compatible
from longstep.resources import ENV_AGENT
from longstep.subagents import DEFAULT_MAX_CHILDREN, DEFAULT_MAX_DEPTH, ENV_MAX_CHILDREN, ENV_MAX_DEPTH


STATE_MACHINE_LOG_PREFIX = "/aws/vendedlogs/states/"


@dataclass(frozen=True)
class DurableAgentProps:
    """What a durable agent needs.

    Attributes:
        layer: the runtime layer.
        checkpoints: the checkpoint table.
        idempotency: the idempotency (lock) table.
        artifacts: the artifacts bucket.
        approvals: the approvals table (longstep/keys.py ``approvals_table``).
        approval_topic: the topic told of each approval request (None: nobody is told).
        agent_resources: agent name -> its declared resources, bound to its CallTool and
            CheckCondition functions only (an agent missing here gets functions with no world grants).
        model_id: default Bedrock model id.
        bedrock_models: other Bedrock model or inference profile ids runs and agents may name
            (ModelTurn may invoke exactly these and ``model_id``).
        bedrock_destinations: profile id -> destination Regions, for profiles not in
            ``longstep_kit.bedrock_access.PROFILE_DESTINATIONS``.
        model_providers: ``LONGSTEP_MODEL_PROVIDERS`` (provider name -> settings), set on
            ModelTurn, whose role alone may read each provider's ``secret_id``.
        max_turns: default turn limit.
        offload_threshold_bytes: tool outputs above this go to S3.
        retention_days: TTL of checkpoint records.
        approval_timeout: how long an approval may wait.
        escalation_timeout: how long an escalated step may wait for a human.
        map_max_concurrency: parallel tool calls per turn.
        retry: transient-error retry budgets per step kind.
        context_budget_tokens: the live context is summarized past this many tokens.
        snapshot_every: a live-context snapshot every this many turns.
        keep_recent_turns: turns kept verbatim when older ones are summarized.
        turns_per_execution: turns before continue-as-new.
        memory_mb: Lambda memory.
        model_timeout: ModelTurn function timeout.
        tool_timeout: CallTool function timeout.
        log_retention: log group retention.
        encryption_key: a customer-managed key the tables and bucket use; the log groups use it too.
        agent_code_dir: the directory of the agents' code (``longstep_kit.bundling.build_agent_code``).
        agents: agent name -> ``module:callable`` (``LONGSTEP_AGENTS``).
        subagent_max_depth: how deep a tree of subagent runs may grow (``longstep.subagents``).
        subagent_max_children: child runs one run may start.
        subagent_timeout: how long a delegated call waits for its child run.
        compatible_code_versions: the run code versions this deploy's state machine version
            accepts at a continue-as-new boundary (``longstep.pinning``).
    """

    layer: lambda_.ILayerVersion
    checkpoints: dynamodb.ITable
    idempotency: dynamodb.ITable
    artifacts: s3.IBucket
    approvals: dynamodb.ITable
    memory: dynamodb.ITable | None = None
    approval_topic: sns.ITopic | None = None
    agent_resources: dict[str, AgentResources] = field(default_factory=dict)
    model_id: str = env.DEFAULT_MODEL_ID
    bedrock_models: tuple[str, ...] = ()
    bedrock_destinations: dict[str, tuple[str, ...]] = field(default_factory=dict)
    model_providers: dict[str, dict] = field(default_factory=dict)
    max_turns: int = env.DEFAULT_MAX_TURNS
    offload_threshold_bytes: int = env.DEFAULT_OFFLOAD_THRESHOLD_BYTES
    retention_days: int = 90
    approval_timeout: Duration = Duration.days(7)
    escalation_timeout: Duration = Duration.days(7)
    map_max_concurrency: int = 10
    retry: RetryPolicies = field(default_factory=RetryPolicies)
    context_budget_tokens: int = env.DEFAULT_CONTEXT_BUDGET_TOKENS
    snapshot_every: int = env.DEFAULT_SNAPSHOT_EVERY
    keep_recent_turns: int = env.DEFAULT_KEEP_RECENT_TURNS
    turns_per_execution: int = env.DEFAULT_TURNS_PER_EXECUTION
    memory_mb: int = 512
    model_timeout: Duration = Duration.minutes(5)
    tool_timeout: Duration = Duration.minutes(2)
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH
    encryption_key: kms.IKey | None = None
    agent_code_dir: Path | None = None
    agents: dict[str, str] = field(default_factory=dict)
    subagent_max_depth: int = DEFAULT_MAX_DEPTH
    subagent_max_children: int = DEFAULT_MAX_CHILDREN
    subagent_timeout: Duration = Duration.days(7)
    compatible_code_versions: tuple[str, ...] = ()


# The tasks that run an agent's own code: one function each per agent (``CallTool-<agent>``).
PER_AGENT = ("CallTool", "CheckCondition")


class DurableAgent(Construct):
    """The loop's Lambda functions (one per task, each with the access in ``ACCESS``; one per agent
    for the tasks in ``PER_AGENT``) and the state machine."""

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
            env.ENV_CONTEXT_BUDGET_TOKENS: str(props.context_budget_tokens),
            env.ENV_SNAPSHOT_EVERY: str(props.snapshot_every),
            env.ENV_KEEP_RECENT_TURNS: str(props.keep_recent_turns),
            env.ENV_TURNS_PER_EXECUTION: str(props.turns_per_execution),
            env.ENV_SERVICE_NAME: env.SERVICE_NAME,
            env.ENV_AGENTS: agents_variable(props.agents),
            env.ENV_METRICS_NAMESPACE: env.METRICS_NAMESPACE,
        }
        code = agent_code(props.agent_code_dir)

        def function(name: str, handler: str, timeout: Duration, agent: str | None = None) -> lambda_.Function:
            variables = environment
            if agent is not None:  # this agent only: a run of another agent fails here, it is not served
                variables = {**environment, env.ENV_AGENTS: agents_variable({agent: props.agents[agent]})}
            fn = runtime_function(
                self,
                name if agent is None else f"{name}-{agent}",
                handler=handler,
                code=code,
                layer=props.layer,
                memory_mb=props.memory_mb,
                timeout=timeout,
                environment=variables,
                log_retention=props.log_retention,
                encryption_key=props.encryption_key,
                no_dlq_reason="Step Functions invokes the function synchronously (a DLQ serves asynchronous invocations "
                "only); the state machine retries failures and escalates what retries cannot fix.",
            )
            self._grant(fn, ACCESS[name])
            self._approval_environment(fn, ACCESS[name])
            return fn

        short = Duration.seconds(30)
        self.init_run = function("InitRun", "longstep.handlers.init_run.lambda_handler", short)
        self.model_turn = function("ModelTurn", "longstep.handlers.model_turn.lambda_handler", props.model_timeout)
        self.request_approval = function("RequestApproval", "longstep.handlers.request_approval.lambda_handler", short)
        self.escalate = function("Escalate", "longstep.handlers.escalate.lambda_handler", short)
        self.wait_for_event = function("WaitForEvent", "longstep.handlers.wait_for_event.lambda_handler", short)
        self.continue_as_new = function("ContinueAsNew", "longstep.handlers.continue_as_new.lambda_handler", short)
        self.finish = function("Finish", "longstep.handlers.finish.lambda_handler", short)
        self.delegate_to_subagent = function("DelegateToSubagent", "longstep.handlers.delegate_to_subagent.lambda_handler", short)
        self.delegate_to_subagent.add_environment(ENV_MAX_DEPTH, str(props.subagent_max_depth))
        self.delegate_to_subagent.add_environment(ENV_MAX_CHILDREN, str(props.subagent_max_children))
        self.child_failed = function("ChildFailed", "longstep.handlers.child_failed.lambda_handler", short)
        # Each agent's tool code (its tools, and the conditions that read its world) runs in
        # functions of its own, whose roles alone hold the agent's declared grants.
        self.agent_functions: dict[str, AgentTaskFunctions] = {}
        for agent in sorted(props.agents):
            tasks = AgentTaskFunctions(
                call_tool=function("CallTool", "longstep.handlers.call_tool.lambda_handler", props.tool_timeout, agent),
                check_condition=function("CheckCondition", "longstep.handlers.check_condition.lambda_handler", short, agent),
            )
            tasks.check_condition.add_environment(ENV_CONDITION_CHECKS, str(condition_checks_per_execution()))
            resources = props.agent_resources.get(agent)
            for fn in (tasks.call_tool, tasks.check_condition):
                if resources is not None:
                    resources.bind(fn)
                else:
                    fn.add_environment(ENV_AGENT, agent)
            self.agent_functions[agent] = tasks
        self._grant_models(self.model_turn)
        self._configure_providers(self.model_turn)
        # The definition calls each function's version published by this deploy (qualified ARNs):
        # an execution keeps the code it started with (docs/deploy.md "Pinning").
        pinned = {
            agent: AgentTaskFunctions(call_tool=tasks.call_tool.current_version, check_condition=tasks.check_condition.current_version)
            for agent, tasks in self.agent_functions.items()
        }
        definition = build_definition(
            Construct(self, "Loop"),
            LoopFunctions(
                init_run=LoopFunction(self.init_run.current_version, short),
                model_turn=LoopFunction(self.model_turn.current_version, props.model_timeout),
                request_approval=LoopFunction(self.request_approval.current_version, short),
                escalate=LoopFunction(self.escalate.current_version, short),
                wait_for_event=LoopFunction(self.wait_for_event.current_version, short),
                continue_as_new=LoopFunction(self.continue_as_new.current_version, short),
                finish=LoopFunction(self.finish.current_version, short),
                delegate=LoopFunction(self.delegate_to_subagent.current_version, short),
                child_failed=LoopFunction(self.child_failed.current_version, short),
                agents=pinned,
                call_tool_timeout=props.tool_timeout,
                check_condition_timeout=short,
            ),
            approval_timeout=props.approval_timeout,
            escalation_timeout=props.escalation_timeout,
            max_concurrency=props.map_max_concurrency,
            retry=props.retry,
            subagent_timeout=props.subagent_timeout,
        )
        # Under /aws/vendedlogs/: Step Functions adds every other log group it logs to to the
        # account's CloudWatch Logs resource policy, which is capped at 5,120 characters
        # (https://docs.aws.amazon.com/step-functions/latest/dg/bp-cwl.html). The name ends with
        # this construct's unique id, so two stacks (or two agents) never collide.
        sm_logs = logs.LogGroup(
            self,
            "StateMachineLogs",
            log_group_name=f"{STATE_MACHINE_LOG_PREFIX}{Names.unique_id(self)}",
            retention=props.log_retention,
            encryption_key=props.encryption_key,
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            definition_body=sfn.DefinitionBody.from_chainable(definition),
            state_machine_type=sfn.StateMachineType.STANDARD,
            tracing_enabled=True,
            logs=sfn.LogOptions(destination=sm_logs, level=sfn.LogLevel.ERROR, include_execution_data=False),
        )
        # Every version of every loop function: an execution pinned to an older state machine
        # version calls the function versions it was deployed with, after later deploys have
        # replaced this policy (the tasks' own grants name this deploy's versions only).
        self.state_machine.add_to_role_policy(
            iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[f"{fn.function_arn}:*" for fn in self.functions.values()])
        )
        self._publish(props.compatible_code_versions)
        self._acknowledge_state_machine_findings()
        # A retried RequestApproval hands an already-recorded decision to its new task token. The
        # grant is a policy of its own: in the role's default policy it would make a cycle (the
        # function waits for its default policy, the state machine for the function).
        for name, fn in self.functions.items():
            if access_of(name).start_execution:
                self._grant_start_execution(name, fn, access_of(name))
            if access_of(name).send_task_response:
                iam.Policy(
                    self,
                    f"{name}TaskResponse",
                    roles=[fn.role],
                    statements=[
                        iam.PolicyStatement(
                            actions=["states:SendTaskSuccess"] + (["states:SendTaskFailure"] if access_of(name).send_task_failure else []),
                            resources=[self.state_machine.state_machine_arn],
                        )
                    ],
                )

    def _grant_start_execution(self, name: str, fn: lambda_.Function, access: Access) -> None:
        """StartExecution on this state machine, and what choosing the version to start on takes."""
        # Step Functions authorizes versions and aliases on the state machine's own ARN:
        # https://docs.aws.amazon.com/step-functions/latest/dg/auth-version-alias.html
        actions = ["states:StartExecution"]
        if access.chooses_version:  # the alias's target and that version's description
            actions += ["states:DescribeStateMachine", "states:DescribeStateMachineAlias"]
        statements = [iam.PolicyStatement(actions=actions, resources=[self.state_machine.state_machine_arn])]
        if access.reads_execution:
            statements.append(iam.PolicyStatement(actions=["states:DescribeExecution"], resources=[self._executions_arn()]))
        policy = iam.Policy(self, f"{name}StartExecution", roles=[fn.role], statements=statements)
        if access.reads_execution:
            Validations.of(policy).acknowledge(
                Acknowledgment(
                    id=f"AwsSolutions-IAM5[Resource::{nag_text(self, self._executions_arn())}]",
                    reason=f"{name} reads its own execution (which state machine version it runs); "
                    "execution names are run ids, not known at deploy time.",
                )
            )

    def _publish(self, compatible_code_versions: tuple[str, ...]) -> None:
        """This deploy's state machine version and the alias runs start on (``constructs.pinned``)."""
        self.version, self.alias = publish_version(self, self.state_machine, describe_compatible(compatible_code_versions))

    def _executions_arn(self) -> str:
        return executions_arn(self.state_machine)

    @property
    def functions(self) -> dict[str, lambda_.Function]:
        """The loop's functions by construct id (``InitRun``, ``ModelTurn``..., ``CallTool-<agent>``)."""
        shared = {name: getattr(self, _attribute(name)) for name in ACCESS if name not in PER_AGENT}
        for agent, tasks in self.agent_functions.items():
            shared[f"CallTool-{agent}"] = tasks.call_tool
            shared[f"CheckCondition-{agent}"] = tasks.check_condition
        return shared

    def _grant_models(self, fn: lambda_.Function) -> None:
        """``bedrock:InvokeModel`` (what Converse needs) on each allowed model: an inference profile
        and the foundation model in every Region it routes to (``longstep_kit.bedrock_access``).

        Converse is authorized as ``bedrock:InvokeModel``
        (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html).
        """
        stack = Stack.of(self)
        region_known = not Token.is_unresolved(stack.region)
        resources: list[str] = []
        for model_id in dict.fromkeys((self.props.model_id, *self.props.bedrock_models)):
            for arn in invoke_model_resources(
                model_id,
                region=stack.region,
                account=stack.account,
                partition=stack.partition,
                destinations=self.props.bedrock_destinations.get(model_id),
                check_source=region_known,
            ):
                if arn not in resources:
                    resources.append(arn)
        fn.add_to_role_policy(iam.PolicyStatement(actions=["bedrock:InvokeModel"], resources=resources))
        for arn in resources:
            if "*" in arn:  # a global profile routes to any commercial Region
                Validations.of(fn.role).acknowledge(
                    Acknowledgment(
                        id=f"AwsSolutions-IAM5[Resource::{nag_text(self, arn)}]",
                        reason="A global cross-Region inference profile may route a request to the model in any "
                        "commercial Region (https://docs.aws.amazon.com/bedrock/latest/userguide/inference-profiles-support.html).",
                    )
                )

    def _configure_providers(self, fn: lambda_.Function) -> None:
        """The configured model providers, and read access to their API-key secrets, for ``fn`` only."""
        providers = self.props.model_providers
        if not providers:
            return
        fn.add_environment(ENV_MODEL_PROVIDERS, providers_variable(providers))
        for name, settings in sorted(providers.items()):
            if settings.get("secret_id"):
                grant_secret_read(fn, settings["secret_id"], f"Model provider {name} reads its API key from")

    def _approval_environment(self, fn: lambda_.Function, access: Access) -> None:
        """The approvals table, topic and timeout, for the functions that use them."""
        props = self.props
        if access.approvals:
            fn.add_environment(env.ENV_APPROVALS_TABLE, props.approvals.table_name)
        if access.notify:
            fn.add_environment(env.ENV_APPROVAL_TIMEOUT_SECONDS, str(int(props.approval_timeout.to_seconds())))
            if props.approval_topic is not None:
                fn.add_environment(env.ENV_APPROVAL_TOPIC_ARN, props.approval_topic.topic_arn)

    def _grant(self, fn: lambda_.Function, access: Access) -> None:
        props = self.props
        props.checkpoints.grant(fn, *access.checkpoints)
        if access.memory and props.memory is not None:
            props.memory.grant(fn, *access.memory)
            fn.add_environment(env.ENV_MEMORY_TABLE, props.memory.table_name)
        if access.approvals:  # the table only: these functions never read its index
            fn.add_to_role_policy(iam.PolicyStatement(actions=list(access.approvals), resources=[props.approvals.table_arn]))
        if access.notify and props.approval_topic is not None:
            # Not grant_publish: its kms:GenerateDataKey* on the topic's key is wider than the key use
            # granted below; with the AWS-managed SNS key, publishing needs no key grant at all.
            fn.add_to_role_policy(iam.PolicyStatement(actions=["sns:Publish"], resources=[props.approval_topic.topic_arn]))
        if access.lock:
            props.idempotency.grant(fn, *LOCK_ACTIONS)
        objects = []
        if access.read_objects:  # model scripts may be uploaded under any key
            objects.append(iam.PolicyStatement(actions=["s3:GetObject"], resources=[props.artifacts.arn_for_objects("*")]))
            # Without ListBucket a missing key is AccessDenied (403), not NoSuchKey; scoped to the
            # artifacts prefix (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html).
            fn.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["s3:ListBucket"],
                    resources=[props.artifacts.bucket_arn],
                    conditions={"StringLike": {"s3:prefix": [f"{ARTIFACT_PREFIX}*"]}},
                )
            )
        if access.write_objects:  # the runtime writes only content-addressed keys
            objects.append(iam.PolicyStatement(actions=["s3:PutObject"], resources=[props.artifacts.arn_for_objects(f"{ARTIFACT_PREFIX}*")]))
        for statement in objects:
            fn.add_to_role_policy(statement)
            Validations.of(fn.role).acknowledge(
                Acknowledgment(
                    id=f"AwsSolutions-IAM5[Resource::{nag_text(self, statement.resources[0])}]",
                    reason="Artifact keys are content hashes (and script keys the user's choice): the object names "
                    "are not known at deploy time, so the grant covers the objects under a prefix, not the bucket.",
                )
            )
        if props.encryption_key is not None:
            props.encryption_key.grant(fn, *KEY_USE)

    def _acknowledge_state_machine_findings(self) -> None:
        role = self.state_machine.role
        Validations.of(role).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="X-Ray tracing and CloudWatch Logs delivery (logs:CreateLogDelivery and friends) accept no resource but *.",
            )
        )
        for name, fn in self.functions.items():
            Validations.of(role).acknowledge(
                Acknowledgment(
                    id=f"AwsSolutions-IAM5[Resource::{nag_text(self, fn.function_arn + ':*')}]",
                    reason=f"Executions pinned to older state machine versions invoke the {name} function's "
                    "older versions (docs/deploy.md, Pinning).",
                )
            )
        Validations.of(self.state_machine).acknowledge(
            Acknowledgment(
                id="AwsSolutions-SF1",
                reason="ERROR level keeps log volume and cost to failures: a long run makes thousands of "
                "transitions, every one already in the execution history. Execution data (which carries task "
                "tokens) is excluded at any level.",
            )
        )


def _attribute(construct_id: str) -> str:
    """``RequestApproval`` -> ``request_approval``: the attribute holding that function."""
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in construct_id).lstrip("_")
