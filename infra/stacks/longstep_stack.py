"""The Longstep stack: durable storage, each agent's declared resources, the runtime layer, the
durable agent, the approval API and notifications, and the agent's dashboard."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from longstep_kit.config import ESCALATION_TIMEOUT_HOURS, DeploymentConfig, workflow_output_name
from longstep_kit.constructs.approval_api import ApprovalApi, ApprovalApiProps, ApprovalNotifications, ApprovalNotificationsProps
from longstep_kit.constructs.loop_fleet import history_events_per_turn as fleet_history_events
from longstep_kit.constructs.history_budget import turns_per_execution
from longstep_kit.constructs.approval_pages import LinkKey
from longstep_kit.constructs.functions import function_code
from longstep_kit.constructs.durable_agent import DurableAgent, DurableAgentProps
from longstep_kit.constructs.durable_workflow import DurableWorkflow, DurableWorkflowProps
from longstep_kit.constructs.observability import AgentObservability, AgentObservabilityProps
from longstep_kit.constructs.agent_resources import AgentResources
from longstep_kit.constructs.runtime_layer import RuntimeLayer
from longstep_kit.constructs.storage import DurableStorage
from longstep import settings as env
from longstep.humans.notifications import ENV_APPROVAL_WEBHOOK_URL
from longstep.links import ENV_LINK_KEY_SECRET
from longstep.pinning import ALIAS_NAME
from longstep.resources import Resource


class LongstepStack(Stack):
    """Deploys one durable agent loop with its stateful resources.

    Args:
        config: the validated deployment configuration.
        layer_dir: the prepared runtime layer directory.
        function_code_dir: the prepared directory of the agents' code (the functions' code asset).
        agent_resources: agent name -> the resources it declares (``Agent.resources``, read at
            synth time by ``longstep_kit.app``); an agent left out declares none.
        workflow_resources: the same for the workflows (``Workflow.resources``).
        agent_conditions: agent name -> the conditions it declares (``Agent.conditions``); None:
            not known, every agent's CheckCondition function is granted what a check reads.
        agent_inline_tools: agent name -> the read tools it runs inside ModelTurn
            (``Agent.inline_read_tools``); an agent left out runs every call in CallTool.
        agent_catalog_secrets: agent name -> its declared secrets its MCP servers list their tools
            with (Init reads them: ``AgentResources.bind_catalog_secrets``).
    """

    def __init__(
        self,
        scope: Construct,
        cid: str,
        *,
        config: DeploymentConfig,
        layer_dir: Path,
        function_code_dir: Path,
        agent_resources: Mapping[str, Sequence[Resource]] | None = None,
        workflow_resources: Mapping[str, Sequence[Resource]] | None = None,
        agent_conditions: Mapping[str, Sequence[str]] | None = None,
        agent_catalog_secrets: Mapping[str, Sequence[str]] | None = None,
        agent_inline_tools: Mapping[str, Sequence[str]] | None = None,
        **kwargs,
    ) -> None:
        super().__init__(scope, cid, **kwargs)
        storage = DurableStorage(self, "Storage", destroy_on_delete=config.destroy_on_delete, customer_managed_key=config.customer_managed_key)
        declared = agent_resources or {}
        resources = {
            name: AgentResources(
                self,
                f"Resources-{name}",
                agent=name,
                declarations=declared.get(name, ()),
                destroy_on_delete=config.destroy_on_delete,
                encryption_key=storage.key,
                catalog_secrets=(agent_catalog_secrets or {}).get(name, ()),
            )
            for name in sorted(config.agents)
        }
        layer = RuntimeLayer(self, "Runtime", layer_dir=layer_dir)
        notifications = ApprovalNotifications(
            self, "ApprovalNotifications", ApprovalNotificationsProps(email=config.approval_email, encryption_key=storage.key)
        )
        # The numbers every loop function reads (longstep.settings.TUNABLES), as configured; the
        # turns per execution computed from the worst-case history of a turn when none is set.
        tunables = {tunable.name: getattr(config, tunable.name) for tunable in env.TUNABLES}
        tunables["turns_per_execution"] = config.turns_per_execution or turns_per_execution(
            config.map_max_concurrency, fleet_history_events(config.fleet)
        )
        agent = DurableAgent(
            self,
            "Agent",
            DurableAgentProps(
                layer=layer.layer,
                function_code_dir=function_code_dir,
                agents=dict(config.agents),
                compatible_code_versions=tuple(config.compatible_code_versions),
                fleet=config.fleet,
                checkpoints=storage.checkpoints,
                idempotency=storage.idempotency,
                artifacts=storage.artifacts,
                approvals=storage.approvals,
                memory=storage.memory,
                approval_topic=notifications.topic,
                agent_resources=resources,
                agent_conditions=None if agent_conditions is None else {k: tuple(v) for k, v in agent_conditions.items()},
                agent_inline_tools={k: tuple(sorted(v)) for k, v in (agent_inline_tools or {}).items() if v},
                model_id=config.model_id,
                bedrock_models=tuple(config.bedrock_models),
                model_providers=dict(config.model_providers),
                approval_timeout=Duration.hours(config.approval_timeout_hours),
                escalation_timeout=Duration.hours(ESCALATION_TIMEOUT_HOURS),
                map_max_concurrency=config.map_max_concurrency,
                retry=config.retry,
                subagent_max_depth=config.subagent_max_depth,
                subagent_max_children=config.subagent_max_children,
                subagent_timeout=Duration.hours(config.subagent_timeout_hours),
                **tunables,
                memory_mb=config.lambda_memory_mb,
                model_timeout=Duration.seconds(config.model_timeout_seconds),
                tool_timeout=Duration.seconds(config.tool_timeout_seconds),
                log_retention=_retention(config.log_retention_days),
                encryption_key=storage.key,
            ),
        )
        # The approval pages' signing key (constructs/approval_pages.py): rotated, never faster than
        # an approval may wait (a link stays valid across one rotation).
        link_key = LinkKey(
            self,
            "LinkKey",
            layer=layer.layer,
            code=function_code(function_code_dir),
            encryption_key=storage.key,
            rotation_days=max(config.link_key_rotation_days, -(-config.approval_timeout_hours // 24)),
            memory_mb=config.lambda_memory_mb,
            log_retention=_retention(config.log_retention_days),
        )
        approval_api = ApprovalApi(
            self,
            "ApprovalApi",
            ApprovalApiProps(
                layer=layer.layer,
                function_code_dir=function_code_dir,
                agents=dict(config.agents),
                approvals=storage.approvals,
                checkpoints=storage.checkpoints,
                state_machine=agent.state_machine,
                retention_days=config.retention_days,
                memory_mb=config.lambda_memory_mb,
                log_retention=_retention(config.log_retention_days),
                encryption_key=storage.key,
                link_key=link_key.secret,
                cloud_watch_role=config.api_gateway_cloudwatch_role,
                stage_logs=config.api_gateway_stage_logs,
                signal_principals=tuple(config.signal_principals),
            ),
        )
        storage.allow_event_delivery()  # the signals' dead-letter queue, with a customer-managed key
        # The notification of a request says where to decide it.
        agent.request_approval.add_environment(env.ENV_APPROVAL_API_URL, approval_api.url)
        # ModelTurn notifies a run's budget ask as any request (longstep.humans.budget_asks).
        agent.model_turn.add_environment(env.ENV_APPROVAL_API_URL, approval_api.url)
        # The approval pages' links in notifications and escalations (longstep.humans.notifications).
        for fn in (agent.request_approval, agent.escalate, agent.model_turn):
            link_key.grant_read(fn, ENV_LINK_KEY_SECRET)
            if config.approval_webhook_url:
                fn.add_environment(ENV_APPROVAL_WEBHOOK_URL, config.approval_webhook_url)
        agent.escalate.add_environment(env.ENV_APPROVAL_API_URL, approval_api.url)
        agent.escalate.add_environment(env.ENV_APPROVAL_TOPIC_ARN, notifications.topic.topic_arn)
        agent.escalate.add_to_role_policy(iam.PolicyStatement(actions=["sns:Publish"], resources=[notifications.topic.topic_arn]))
        self.workflows = self._workflows(config, storage, layer, notifications, function_code_dir, workflow_resources or {}, agent)
        for name, workflow in self.workflows.items():
            # A workflow's child agent run (ctx.agent) answers the workflow's task token when it
            # ends (Finish) or is aborted (ChildFailed), as a subagent answers its parent's. A
            # policy of its own: in the roles' default policies it would make a cycle.
            iam.Policy(
                self,
                f"WorkflowChildAnswers-{name}",
                roles=[agent.functions["Finish"].role, agent.functions["ChildFailed"].role],
                statements=[
                    iam.PolicyStatement(
                        actions=["states:SendTaskSuccess", "states:SendTaskFailure"], resources=[workflow.state_machine.state_machine_arn]
                    )
                ],
            )
            # The approval API decides (and signals) workflow waits too.
            for fn in (approval_api.handler, approval_api.signal_handler):
                fn.add_to_role_policy(iam.PolicyStatement(actions=["states:SendTaskSuccess"], resources=[workflow.state_machine.state_machine_arn]))
        observability = AgentObservability(
            self,
            "Observability",
            AgentObservabilityProps(
                state_machine=agent.state_machine,
                functions=agent.functions,
                alarm_emails=tuple(config.alarm_emails),
                encryption_key=storage.key,
            ),
        )
        CfnOutput(self, "StateMachineArn", value=agent.state_machine.state_machine_arn)
        CfnOutput(self, "DashboardName", value=observability.dashboard.dashboard_name)
        CfnOutput(self, "AlarmTopicArn", value=observability.alarm_topic.topic_arn)
        CfnOutput(self, "CheckpointTableName", value=storage.checkpoints.table_name)
        CfnOutput(self, "IdempotencyTableName", value=storage.idempotency.table_name)
        CfnOutput(self, "ArtifactBucketName", value=storage.artifacts.bucket_name)
        CfnOutput(self, "ApprovalsTableName", value=storage.approvals.table_name)
        CfnOutput(self, "MemoryTableName", value=storage.memory.table_name)
        CfnOutput(self, "ApprovalTopicArn", value=notifications.topic.topic_arn)
        CfnOutput(self, "ApprovalApiUrl", value=approval_api.url)
        # Operators mint page links with it (`longstep approvals`, `longstep inbox-link`), under
        # their own secretsmanager:GetSecretValue; the ARN is not a secret.
        CfnOutput(self, "LinkKeySecretArn", value=link_key.secret.secret_arn)
        CfnOutput(self, "SignalBusName", value=approval_api.signal_bus.event_bus_name)
        for name, workflow in sorted(self.workflows.items()):
            CfnOutput(self, workflow_output_name(name), value=workflow.state_machine.state_machine_arn)

    def _workflows(self, config, storage, layer, notifications, function_code_dir, declared, agent) -> dict[str, DurableWorkflow]:
        """One DurableWorkflow per configured workflow (none configured: nothing is added)."""
        built = {}
        for name, reference in sorted(config.workflows.items()):
            resources = AgentResources(
                self,
                f"WorkflowResources-{name}",
                agent=name,
                declarations=declared.get(name, ()),
                destroy_on_delete=config.destroy_on_delete,
                encryption_key=storage.key,
            )
            built[name] = DurableWorkflow(
                self,
                f"Workflow-{name}",
                DurableWorkflowProps(
                    name=name,
                    reference=reference,
                    layer=layer.layer,
                    function_code_dir=function_code_dir,
                    checkpoints=storage.checkpoints,
                    idempotency=storage.idempotency,
                    approvals=storage.approvals,
                    artifact_bucket_name=storage.artifacts.bucket_name,
                    resources=resources,
                    approval_topic=notifications.topic,
                    approval_timeout=Duration.hours(config.approval_timeout_hours),
                    retry=config.retry,
                    step_timeout=Duration.seconds(config.tool_timeout_seconds),
                    retention_days=config.retention_days,
                    memory_mb=config.lambda_memory_mb,
                    log_retention=_retention(config.log_retention_days),
                    encryption_key=storage.key,
                    agent_state_machine=agent.state_machine,
                    # Children start on the alias, as runs do (its ARN is the state machine's and its name).
                    agent_start_arn=f"{agent.state_machine.state_machine_arn}:{ALIAS_NAME}",
                    agents=dict(config.agents),
                    agent_timeout=Duration.hours(config.subagent_timeout_hours),
                ),
            )
        return built


_RETENTION = {
    1: "ONE_DAY",
    3: "THREE_DAYS",
    5: "FIVE_DAYS",
    7: "ONE_WEEK",
    14: "TWO_WEEKS",
    30: "ONE_MONTH",
    60: "TWO_MONTHS",
    90: "THREE_MONTHS",
    120: "FOUR_MONTHS",
    150: "FIVE_MONTHS",
    180: "SIX_MONTHS",
    365: "ONE_YEAR",
    400: "THIRTEEN_MONTHS",
    545: "EIGHTEEN_MONTHS",
    731: "TWO_YEARS",
    1827: "FIVE_YEARS",
    3653: "TEN_YEARS",
}


def _retention(days: int) -> logs.RetentionDays:
    return getattr(logs.RetentionDays, _RETENTION[days])
