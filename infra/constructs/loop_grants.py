"""The loop functions' grants: each row of ``loop_access.ACCESS`` made into IAM statements.

Least privilege per function: the tables, the bucket, the key and the topic its row names; the
Bedrock models (ModelTurn only); and calls on the state machine (starting executions, answering
task tokens), as policies of their own. Where a grant must name a wildcard, the cdk-nag finding
is acknowledged next to it, with the reason.
"""

from __future__ import annotations


from aws_cdk import Acknowledgment, Stack, Token, Validations
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from longstep import memory
from longstep import settings as env
from longstep.artifacts import ARTIFACT_PREFIX
from longstep.models.registry import ENV_MODEL_PROVIDERS
from longstep_kit.bedrock_access import ModelGrant, invoke_model_grants
from longstep_kit.config import providers_variable
from longstep_kit.constructs.agent_resources import grant_secret_read
from longstep_kit.constructs.durable_agent_props import DurableAgentProps
from longstep_kit.constructs.loop_access import KEY_USE, LOCK_ACTIONS, Access, access_of
from longstep_kit.constructs.nag import nag_text
from longstep_kit.constructs.pinned import executions_arn
from longstep_kit.model_regions import check_pairing

LEADING_KEYS = "dynamodb:LeadingKeys"


def grant_access(scope: Construct, fn: lambda_.Function, access: Access, props: DurableAgentProps, agent: str | None = None) -> None:
    """The tables, bucket objects, topic and key ``access`` names, on ``fn``'s role.

    Args:
        agent: the agent whose tool code ``fn`` runs (``CallTool-<agent>``): its memory grant
            reaches that agent's namespaces only.
    """
    grant_table(fn, props.checkpoints, access.checkpoint_actions())
    if access.memory and props.memory is not None:
        grant_memory(fn, access.memory, props.memory.table_arn, agent)
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
                id=f"AwsSolutions-IAM5[Resource::{nag_text(scope, statement.resources[0])}]",
                reason="Artifact keys are content hashes (and script keys the user's choice): the object names "
                "are not known at deploy time, so the grant covers the objects under a prefix, not the bucket.",
            )
        )
    if props.encryption_key is not None:
        props.encryption_key.grant(fn, *KEY_USE)


def grant_table(fn: lambda_.Function, table: dynamodb.ITable, actions: tuple[str, ...]) -> None:
    """``actions`` on ``table`` itself, not its indexes: ``Table.grant`` adds ``table/index/*``
    once a table has one (the checkpoint table's runs index), and no function reads it (the
    operator's CLI does); the key use is granted with the others' (``KEY_USE``)."""
    fn.add_to_role_policy(iam.PolicyStatement(actions=list(actions), resources=[table.table_arn]))


def grant_memory(fn: lambda_.Function, actions: tuple[str, ...], table_arn: str, agent: str | None) -> None:
    """``actions`` on the memory table; for an agent's tool function, on its namespaces only.

    The table is shared; ``dynamodb:LeadingKeys`` (the partition keys a request touches) keeps
    each agent's tool code to its own namespaces, ``<agent>`` and ``<agent>#user#<user>``
    (``longstep.memory.namespace``; agent names hold no ``#``, ``*`` or ``?``, so no agent's
    patterns match another's). ``ForAllValues`` holds for a request with no partition key at all,
    so ``Null: false`` requires one (Query and PutItem always carry it):
    https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/specifying-conditions.html,
    https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-single-vs-multi-valued-context-keys.html
    """
    conditions = None
    if agent is not None:
        namespaces = [memory.namespace(agent, None), memory.namespace(agent, "*")]
        conditions = {"ForAllValues:StringLike": {LEADING_KEYS: namespaces}, "Null": {LEADING_KEYS: "false"}}
    fn.add_to_role_policy(iam.PolicyStatement(actions=list(actions), resources=[table_arn], conditions=conditions))


def approval_environment(fn: lambda_.Function, access: Access, props: DurableAgentProps) -> None:
    """The approvals table, topic and timeout, for the functions that use them."""
    if access.approvals:
        fn.add_environment(env.ENV_APPROVALS_TABLE, props.approvals.table_name)
    if access.notify:
        fn.add_environment(env.ENV_APPROVAL_TIMEOUT_SECONDS, str(int(props.approval_timeout.to_seconds())))
        if props.approval_topic is not None:
            fn.add_environment(env.ENV_APPROVAL_TOPIC_ARN, props.approval_topic.topic_arn)


def grant_models(scope: Construct, fn: lambda_.Function, props: DurableAgentProps) -> None:
    """``bedrock:InvokeModel`` (what Converse needs) on each allowed model: a plain model in the
    stack's Region; an inference profile, and its foundation model in any Region for calls
    through that profile only (``longstep_kit.bedrock_access``).

    Converse is authorized as ``bedrock:InvokeModel``
    (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html).
    """
    stack = Stack.of(scope)
    region_known = not Token.is_unresolved(stack.region)
    plain: list[str] = []
    conditioned: list[ModelGrant] = []
    for model_id in dict.fromkeys((props.model_id, *props.bedrock_models)):
        chosen_at_deploy = model_id == props.model_id and props.model_foundation is not None
        if region_known and not chosen_at_deploy:
            check_pairing(model_id, stack.region)  # a profile that cannot be called from here
        foundation = props.model_foundation if chosen_at_deploy else None
        for grant in invoke_model_grants(
            model_id, region=stack.region, account=stack.account, partition=stack.partition, foundation_model=foundation
        ):
            if grant.through_profile is not None:
                conditioned.append(grant)
            else:
                plain.extend(arn for arn in grant.resources if arn not in plain)
    if plain:
        fn.add_to_role_policy(iam.PolicyStatement(actions=["bedrock:InvokeModel"], resources=plain))
    for grant in conditioned:
        fn.add_to_role_policy(iam.PolicyStatement(actions=["bedrock:InvokeModel"], resources=list(grant.resources), conditions=grant.conditions()))
        Validations.of(fn.role).acknowledge(
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::{nag_text(scope, grant.resources[0])}]",
                reason="A cross-Region inference profile routes to the model in Regions AWS adds over time: the model "
                "is granted in any Region, for calls through this profile only (bedrock:InferenceProfileArn; "
                "https://docs.aws.amazon.com/bedrock/latest/userguide/inference-profiles-prereq.html).",
            )
        )


def configure_providers(fn: lambda_.Function, providers: dict[str, dict]) -> None:
    """The configured model providers, and read access to their API-key secrets, for ``fn`` only."""
    if not providers:
        return
    fn.add_environment(ENV_MODEL_PROVIDERS, providers_variable(providers))
    for name, settings in sorted(providers.items()):
        if settings.get("secret_id"):
            grant_secret_read(fn, settings["secret_id"], f"Model provider {name} reads its API key from")


def grant_state_machine_calls(scope: Construct, state_machine: sfn.StateMachine, functions: dict[str, lambda_.Function]) -> None:
    """StartExecution and the task-token answers on ``state_machine``, for the functions whose row asks.

    Each grant is a policy of its own: in the role's default policy it would make a cycle (the
    function waits for its default policy, the state machine for the function). A retried
    RequestApproval, for one, hands an already-recorded decision to its new task token.
    """
    for name, fn in functions.items():
        access = access_of(name)
        if access.start_execution:
            _grant_start_execution(scope, name, fn, access, state_machine)
        if access.send_task_response:
            iam.Policy(
                scope,
                f"{name}TaskResponse",
                roles=[fn.role],
                statements=[
                    iam.PolicyStatement(
                        actions=["states:SendTaskSuccess"] + (["states:SendTaskFailure"] if access.send_task_failure else []),
                        resources=[state_machine.state_machine_arn],
                    )
                ],
            )


def _grant_start_execution(scope: Construct, name: str, fn: lambda_.Function, access: Access, state_machine: sfn.StateMachine) -> None:
    """StartExecution on this state machine, and what choosing the version to start on takes."""
    # Step Functions authorizes versions and aliases on the state machine's own ARN:
    # https://docs.aws.amazon.com/step-functions/latest/dg/auth-version-alias.html
    actions = ["states:StartExecution"]
    if access.chooses_version:  # the alias's target and that version's description
        actions += ["states:DescribeStateMachine", "states:DescribeStateMachineAlias"]
    statements = [iam.PolicyStatement(actions=actions, resources=[state_machine.state_machine_arn])]
    if access.reads_execution:
        statements.append(iam.PolicyStatement(actions=["states:DescribeExecution"], resources=[executions_arn(state_machine)]))
    policy = iam.Policy(scope, f"{name}StartExecution", roles=[fn.role], statements=statements)
    if access.reads_execution:
        Validations.of(policy).acknowledge(
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::{nag_text(scope, executions_arn(state_machine))}]",
                reason=f"{name} reads its own execution (which state machine version it runs); "
                "execution names are run ids, not known at deploy time.",
            )
        )


def acknowledge_state_machine_findings(state_machine: sfn.StateMachine, functions: dict[str, lambda_.Function]) -> None:
    """The cdk-nag findings on the state machine and its role, with the reasons they stand."""
    role = state_machine.role
    Validations.of(role).acknowledge(
        Acknowledgment(
            id="AwsSolutions-IAM5[Resource::*]",
            reason="X-Ray tracing and CloudWatch Logs delivery (logs:CreateLogDelivery and friends) accept no resource but *.",
        )
    )
    for name, fn in functions.items():
        Validations.of(role).acknowledge(
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::{nag_text(state_machine, fn.function_arn + ':*')}]",
                reason=f"Executions pinned to older state machine versions invoke the {name} function's older versions (docs/deploy.md, Pinning).",
            )
        )
    Validations.of(state_machine).acknowledge(
        Acknowledgment(
            id="AwsSolutions-SF1",
            reason="ERROR level keeps log volume and cost to failures: a long run makes thousands of "
            "transitions, every one already in the execution history. Execution data (which carries task "
            "tokens) is excluded at any level.",
        )
    )
