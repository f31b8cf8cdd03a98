"""A durable workflow: one workflow's function and the small state machine that replays it.

    Invoke -> Route: continue -> Invoke           (Invoke fails past its retries -> Escalate -> Invoke | Aborted)
                     wait     -> Sleep (Wait state) -> Invoke
                     approval -> Approval (task token: the approvals table) -> Invoke
                     event    -> Signal (task token: a signal waiter) -> Invoke
                     delegate -> Delegate (task token: a child agent run's Finish answers) -> Invoke
                     continue_as_new -> HandOver (starts the next execution) -> HandedOver
                     done     -> Done (Succeed)     failed -> Failed (Fail)

Each Invoke is one pass of the workflow function over its log (``longstep.workflows.tasks``):
it runs at most one new step and returns a directive. Waits are the state machine's: a Wait
state or a task token, so a workflow sleeping for days runs no Lambda at all. The state holds
the run id, the workflow's name and input, the directive and the last wait's outcome, never
step results (they live in the checkpoint table).

Pinned like the agent state machine: the tasks call the function's published version, and each
deploy publishes a state machine version behind the alias ``live`` that runs start on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from aws_cdk import Acknowledgment, Duration, Stack, Validations
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from longstep import settings as env
from longstep.errors import WorkflowFailedError
from longstep.subagents import CHILD_FAILED_ERROR
from longstep.workflows import log
from longstep.workflows.children import ENV_AGENT_STATE_MACHINE
from longstep.workflows.definition import DEFAULT_PASSES_PER_EXECUTION, ENV_PASSES_PER_EXECUTION, ENV_WORKFLOWS
from longstep_kit.constructs.execution_key import encrypt_executions
from longstep_kit.constructs.loop_humans import ABORTED_ERROR
from longstep_kit.constructs.agent_resources import AgentResources
from longstep_kit.constructs.nag import nag_text
from longstep_kit.constructs.pinned import executions_arn, publish_version
from longstep_kit.constructs.loop_access import KEY_USE
from longstep_kit.constructs.loop_grants import grant_table
from longstep_kit.constructs.functions import function_code, agents_variable, runtime_function
from longstep_kit.retry import RetryPolicies

HANDLER = "longstep_functions.workflow.lambda_handler"
# What the function does to the checkpoint table (longstep/workflows/, and the signal and
# approval-claim records of longstep/humans/), the approvals table and the step lock.
# DeleteItem: a failed step's claim is removed (longstep.claims; the step's record is its lock).
CHECKPOINT_ACTIONS = ("dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem")
APPROVAL_ACTIONS = ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem")


@dataclass(frozen=True)
class DurableWorkflowProps:
    """What a durable workflow needs.

    Attributes:
        name: the workflow's name (what start inputs put in ``workflow``).
        reference: ``module:callable`` returning its ``longstep.workflows.Workflow``.
        layer: the runtime layer.
        function_code_dir: the project's code directory (the workflow's module is in it).
        checkpoints: the checkpoint table (the step log).
        idempotency: the step-lock table.
        approvals: the approvals table.
        artifact_bucket_name: the artifacts bucket (named in the settings; not used by workflows).
        resources: the workflow's declared resources, bound to its function only.
        approval_topic: told of each approval request (None: nobody).
        approval_timeout: default time an approval may wait.
        escalation_timeout: how long a failed step may wait for a human.
        passes_per_execution: passes before an execution hands the run to a new one (a pass
            adds at most about 20 history events with a retry or two: 1,000 stay well under 25,000).
        retry: transient-error budgets (``bookkeeping`` for parks, ``tool`` for steps).
        step_timeout: the function's timeout (a step runs within one invocation).
        agent_state_machine: the agent state machine its ``ctx.agent`` calls start child runs of
            (None: the workflow may not call agents).
        agent_start_arn: the ARN children start on (the agent state machine's alias; default: the
            state machine itself).
        agents: the deployed agents (name -> reference): a call to another agent is refused at once.
        agent_timeout: how long a ``ctx.agent`` call waits for its child run.
    """

    name: str
    reference: str
    layer: lambda_.ILayerVersion
    function_code_dir: Path
    checkpoints: dynamodb.ITable
    idempotency: dynamodb.ITable
    approvals: dynamodb.ITable
    artifact_bucket_name: str
    resources: AgentResources | None = None
    approval_topic: sns.ITopic | None = None
    approval_timeout: Duration = Duration.days(7)
    escalation_timeout: Duration = Duration.days(7)
    passes_per_execution: int = DEFAULT_PASSES_PER_EXECUTION
    retry: RetryPolicies = field(default_factory=RetryPolicies)
    step_timeout: Duration = Duration.minutes(2)
    retention_days: int = env.DEFAULT_RETENTION_DAYS
    memory_mb: int = 512
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH
    encryption_key: kms.IKey | None = None
    agent_state_machine: sfn.IStateMachine | None = None
    agent_start_arn: str | None = None
    agents: dict[str, str] = field(default_factory=dict)
    agent_timeout: Duration = Duration.hours(24)


class DurableWorkflow(Construct):
    """The workflow's function (its role holds exactly what the runtime and its declared
    resources need) and its Standard state machine."""

    def __init__(self, scope: Construct, cid: str, props: DurableWorkflowProps) -> None:
        super().__init__(scope, cid)
        self.props = props
        self.function = runtime_function(
            self,
            "Function",
            handler=HANDLER,
            code=function_code(props.function_code_dir),
            layer=props.layer,
            memory_mb=props.memory_mb,
            timeout=props.step_timeout,
            environment=self._environment(),
            log_retention=props.log_retention,
            encryption_key=props.encryption_key,
            no_dlq_reason="Step Functions invokes the function synchronously (a DLQ serves asynchronous invocations "
            "only); the state machine retries failures.",
        )
        self._grant(self.function)
        if props.resources is not None:
            props.resources.bind(self.function)
        sm_logs = logs.LogGroup(self, "StateMachineLogs", retention=props.log_retention, encryption_key=props.encryption_key)
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            definition_body=sfn.DefinitionBody.from_chainable(self._definition()),
            state_machine_type=sfn.StateMachineType.STANDARD,
            tracing_enabled=True,
            logs=sfn.LogOptions(destination=sm_logs, level=sfn.LogLevel.ERROR, include_execution_data=False),
        )
        encrypt_executions(self, "ExecutionKey", self.state_machine, props.encryption_key)
        # Every version of the function: an execution pinned to an older state machine version
        # calls the function version it was deployed with, after later deploys replaced this policy.
        self.state_machine.add_to_role_policy(iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[f"{self.function.function_arn}:*"]))
        self._publish()
        # A park hands a decision or a buffered signal to its task token at once. A policy of its
        # own: in the role's default policy it would make a cycle (function <-> state machine).
        responses = iam.Policy(
            self,
            "TaskResponse",
            roles=[self.function.role],
            statements=[
                # SendTaskFailure: a child agent run that failed before its call parked is handed on.
                iam.PolicyStatement(
                    actions=["states:SendTaskSuccess", "states:SendTaskFailure", "states:StartExecution"],
                    resources=[self.state_machine.state_machine_arn],
                ),
                # The hand-over starts the next execution on the version this one runs (pinning).
                iam.PolicyStatement(actions=["states:DescribeExecution"], resources=[executions_arn(self.state_machine)]),
            ],
        )
        Validations.of(responses).acknowledge(
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::{nag_text(self, executions_arn(self.state_machine))}]",
                reason="The hand-over reads its own execution (which state machine version it runs); execution names are run ids.",
            )
        )
        if props.agent_state_machine is not None:
            # ctx.agent starts child runs of the agent state machine. Step Functions authorizes a
            # start on a version or alias against the state machine's own ARN:
            # https://docs.aws.amazon.com/step-functions/latest/dg/auth-version-alias.html
            iam.Policy(
                self,
                "StartAgents",
                roles=[self.function.role],
                statements=[iam.PolicyStatement(actions=["states:StartExecution"], resources=[props.agent_state_machine.state_machine_arn])],
            )
        self._acknowledge()

    def _environment(self) -> dict[str, str]:
        props = self.props
        variables = {
            env.ENV_CHECKPOINT_TABLE: props.checkpoints.table_name,
            env.ENV_IDEMPOTENCY_TABLE: props.idempotency.table_name,
            env.ENV_ARTIFACT_BUCKET: props.artifact_bucket_name,
            env.ENV_APPROVALS_TABLE: props.approvals.table_name,
            env.ENV_APPROVAL_TIMEOUT_SECONDS: str(int(props.approval_timeout.to_seconds())),
            env.ENV_RETENTION_DAYS: str(props.retention_days),
            env.ENV_SERVICE_NAME: env.SERVICE_NAME,
            env.ENV_METRICS_NAMESPACE: env.METRICS_NAMESPACE,
            ENV_WORKFLOWS: agents_variable({props.name: props.reference}),
            ENV_PASSES_PER_EXECUTION: str(props.passes_per_execution),
        }
        if props.approval_topic is not None:
            variables[env.ENV_APPROVAL_TOPIC_ARN] = props.approval_topic.topic_arn
        if props.agent_state_machine is not None:
            variables[ENV_AGENT_STATE_MACHINE] = props.agent_start_arn or props.agent_state_machine.state_machine_arn
            variables[env.ENV_AGENTS] = agents_variable(props.agents)
        return variables

    def _grant(self, fn: lambda_.Function) -> None:
        props = self.props
        grant_table(fn, props.checkpoints, tuple(CHECKPOINT_ACTIONS))  # the table, not its runs index
        fn.add_to_role_policy(iam.PolicyStatement(actions=list(APPROVAL_ACTIONS), resources=[props.approvals.table_arn]))
        if props.approval_topic is not None:
            fn.add_to_role_policy(iam.PolicyStatement(actions=["sns:Publish"], resources=[props.approval_topic.topic_arn]))
        if props.encryption_key is not None:
            props.encryption_key.grant(fn, *KEY_USE)

    def _definition(self) -> sfn.IChainable:
        props = self.props
        step_retry = props.retry.tool
        invoke = tasks.LambdaInvoke(
            self,
            "Invoke",
            lambda_function=self.function.current_version,
            payload_response_only=True,
            retry_on_service_exceptions=False,
            result_path="$.directive",
            comment="Replay the workflow over its log; run its next step, or say what to wait for",
        )
        step_retry.apply(invoke, props.step_timeout)

        def park(
            cid: str, comment: str, action: str = "park", result_path: str = "$.resumed", timeout: sfn.Timeout | None = None
        ) -> tasks.LambdaInvoke:
            task = tasks.LambdaInvoke(
                self,
                cid,
                lambda_function=self.function.current_version,
                integration_pattern=sfn.IntegrationPattern.WAIT_FOR_TASK_TOKEN,
                payload=sfn.TaskInput.from_object({"action": action, "state": sfn.JsonPath.entire_payload, "token": sfn.JsonPath.task_token}),
                result_path=result_path,
                task_timeout=timeout or sfn.Timeout.at("$.directive.timeout_seconds"),
                retry_on_service_exceptions=False,
                comment=comment,
            )
            props.retry.bookkeeping.apply(task, props.step_timeout)
            return task

        approval = park("Approval", "Wait, holding no compute, for a human's decision")
        approval_timed_out = sfn.Pass(self, "ApprovalTimedOut", result=sfn.Result.from_object({"decision": "timeout"}), result_path="$.resumed")
        approval.add_catch(approval_timed_out, errors=["States.Timeout"], result_path="$.error")
        signal = park("Signal", "Wait, holding no compute, for a signal sent to the run")
        signal_timed_out = sfn.Pass(self, "SignalTimedOut", result=sfn.Result.from_object({"timed_out": True}), result_path="$.resumed")
        signal.add_catch(signal_timed_out, errors=["States.Timeout"], result_path="$.error")
        # A Wait state waits up to a year (a Standard execution's own limit), running nothing:
        # https://docs.aws.amazon.com/step-functions/latest/dg/state-wait.html
        # ctx.agent: start the child agent run, then hold no compute until its Finish answers the
        # token. A failed child answers with SendTaskFailure (SubagentFailed), caught into the
        # outcome the next pass records; so is no answer within the agent timeout.
        # Task tokens: https://docs.aws.amazon.com/step-functions/latest/dg/connect-to-resource.html#connect-wait-token
        delegate = tasks.LambdaInvoke(
            self,
            "Delegate",
            lambda_function=self.function.current_version,
            integration_pattern=sfn.IntegrationPattern.WAIT_FOR_TASK_TOKEN,
            payload=sfn.TaskInput.from_object(
                {
                    "action": "park",
                    "state": sfn.JsonPath.entire_payload,
                    "token": sfn.JsonPath.task_token,
                    "execution_name": sfn.JsonPath.execution_name,
                }
            ),
            result_path="$.resumed",
            task_timeout=sfn.Timeout.duration(props.agent_timeout),
            retry_on_service_exceptions=False,
            comment="ctx.agent: start the child agent run; wait, holding no compute, for its Finish to answer",
        )
        props.retry.bookkeeping.apply(delegate, props.step_timeout)
        agent_timed_out = sfn.Pass(self, "AgentTimedOut", result=sfn.Result.from_object({"timed_out": True}), result_path="$.resumed")
        delegate.add_catch(agent_timed_out, errors=["States.Timeout"], result_path="$.error")
        delegate.add_catch(invoke, errors=[CHILD_FAILED_ERROR], result_path="$.resumed")
        sleep = sfn.Wait(self, "Sleep", time=sfn.WaitTime.seconds_path("$.directive.seconds"), comment="ctx.sleep / wait_for(timer=...)")
        done = sfn.Succeed(self, "Done", output_path="$.directive.output")
        # Before the history could reach 25,000 events, a fresh execution takes the run over.
        hand_over = tasks.LambdaInvoke(
            self,
            "HandOver",
            lambda_function=self.function.current_version,
            payload_response_only=True,
            retry_on_service_exceptions=False,
            payload=sfn.TaskInput.from_object(
                {
                    "action": "continue",
                    "state": sfn.JsonPath.entire_payload,
                    "state_machine_arn": sfn.JsonPath.state_machine_id,
                    "execution_name": sfn.JsonPath.execution_name,
                }
            ),
            comment="Start the run's next execution; it replays the log from the top",
        )
        props.retry.bookkeeping.apply(hand_over, props.step_timeout)
        handed_over = sfn.Succeed(self, "HandedOver")
        failed = sfn.Fail(self, "Failed", error=WorkflowFailedError.error_name(), cause_path="$.directive.cause")
        route = (
            sfn.Choice(self, "Route", comment="On the directive the pass returned")
            .when(sfn.Condition.string_equals("$.directive.next", log.CONTINUE), invoke)
            .when(sfn.Condition.string_equals("$.directive.next", log.WAIT), sleep.next(invoke))
            .when(sfn.Condition.string_equals("$.directive.next", log.APPROVE), approval.next(invoke))
            .when(sfn.Condition.string_equals("$.directive.next", log.SIGNAL), signal.next(invoke))
            .when(sfn.Condition.string_equals("$.directive.next", log.DELEGATE), delegate.next(invoke))
            .when(sfn.Condition.string_equals("$.directive.next", log.DONE), done)
            .when(sfn.Condition.string_equals("$.directive.next", log.CONTINUE_AS_NEW), hand_over.next(handed_over))
            .otherwise(failed)
        )
        approval_timed_out.next(invoke)
        signal_timed_out.next(invoke)
        agent_timed_out.next(invoke)
        # What retries could not fix waits for a human: retry (after a fix, or "it did not
        # happen"), skip with the step's result, or abort. The answer is read from its record.
        escalate = park(
            "Escalate",
            "Park the failed step until a human answers",
            action="escalate",
            result_path="$.resolution",
            timeout=sfn.Timeout.duration(props.escalation_timeout),
        )
        invoke.add_catch(escalate, errors=["States.ALL"], result_path="$.error")
        aborted = sfn.Fail(self, "Aborted", error=ABORTED_ERROR, cause="a human aborted the run at an escalation")
        escalate.next(sfn.Choice(self, "Resolved").when(sfn.Condition.string_equals("$.resolution.action", "abort"), aborted).otherwise(invoke))
        return invoke.next(route)

    def _publish(self) -> None:
        """This deploy's state machine version and the alias runs start on (``constructs.pinned``)."""
        self.version, self.alias = publish_version(self, self.state_machine)

    def _acknowledge(self) -> None:
        role = self.state_machine.role
        Validations.of(role).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="X-Ray tracing and CloudWatch Logs delivery (logs:CreateLogDelivery and friends) accept no resource but *.",
            ),
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::<{Stack.of(self).get_logical_id(self.function.node.default_child)}.Arn>:*]",
                reason="The Invoke, Approval and Signal tasks may invoke the function's versions and aliases (CDK's LambdaInvoke grant).",
            ),
        )
        Validations.of(self.state_machine).acknowledge(
            Acknowledgment(
                id="AwsSolutions-SF1",
                reason="ERROR level keeps log volume and cost to failures; every transition is in the execution "
                "history already. Execution data (which carries task tokens) is excluded at any level.",
            )
        )
