"""A durable agent: the loop's Lambda functions and the Standard state machine that drives them.

The definition's states are built in ``agent_loop``; each function's grants, from its row of
``loop_access.ACCESS``, in ``loop_grants``.
"""

from __future__ import annotations


from aws_cdk import Aws, Duration, Fn, Names
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from longstep import settings as env
from longstep.pinning import describe_compatible
from longstep.resources import ENV_AGENT
from longstep.subagents import ENV_MAX_CHILDREN, ENV_MAX_DEPTH
from longstep.settings import ENV_CONDITION_CHECKS
from longstep_kit.constructs.agent_loop import build_definition
from longstep_kit.constructs.durable_agent_props import DurableAgentProps
from longstep_kit.constructs.execution_key import encrypt_executions
from longstep_kit.constructs.functions import function_code, agents_variable, runtime_function
from longstep_kit.constructs.history_budget import condition_checks_per_execution
from longstep_kit.constructs.loop_access import ACCESS
from longstep_kit.constructs.loop_fleet import fleet_function, grant_fleet
from longstep_kit.constructs.loop_grants import (
    acknowledge_state_machine_findings,
    approval_environment,
    configure_providers,
    grant_access,
    grant_models,
    grant_state_machine_calls,
)
from longstep_kit.constructs.loop_inline import own_model_turn
from longstep_kit.constructs.loop_tasks import AgentTaskFunctions, LoopFunction, LoopFunctions
from longstep_kit.constructs.pinned import publish_version


STATE_MACHINE_LOG_PREFIX = "/aws/vendedlogs/states/"


def state_machine_log_group_name(scope: Construct) -> str:
    """The state machine's log group name: under /aws/vendedlogs/, unique per stack instance.

    Under /aws/vendedlogs/ because Step Functions adds every other log group it logs to to the
    account's CloudWatch Logs resource policy, capped at 5,120 characters
    (https://docs.aws.amazon.com/step-functions/latest/dg/bp-cwl.html); so the name is ours to
    give, not CloudFormation's. It ends with the construct's unique id (two agents or stacks
    never collide) and the id of this stack instance (the last part of ``AWS::StackId``, new at
    every create): the group is retained when the stack is destroyed, and a later deploy of the
    same stack creates a group of its own next to it instead of failing on the name.
    """
    stack_uuid = Fn.select(2, Fn.split("/", Aws.STACK_ID))
    return f"{STATE_MACHINE_LOG_PREFIX}{Names.unique_id(scope)}-{stack_uuid}"


# The tasks that run an agent's own code: one function each per agent (``CallTool-<agent>``; an
# eval run's ``CallToolEval-<agent>``, holding only the agent's reads: docs/evals.md); and
# ``ModelTurn-<agent>`` for an agent that runs read tools inline (``loop_inline``).
PER_AGENT = ("CallTool", "CallToolEval", "CheckCondition")
MODEL_TURN_HANDLER = "longstep_functions.model_turn.lambda_handler"


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
            **{tunable.variable: str(getattr(props, tunable.name)) for tunable in env.TUNABLES},
            env.ENV_SERVICE_NAME: env.SERVICE_NAME,
            env.ENV_AGENTS: agents_variable(props.agents),
            env.ENV_METRICS_NAMESPACE: env.METRICS_NAMESPACE,
            # What ModelTurn keeps a turn's records for (longstep.tasks.common.turn_horizon).
            env.ENV_WAIT_TIMEOUTS: env.WaitTimeouts(
                int(props.approval_timeout.to_seconds()), int(props.escalation_timeout.to_seconds()), int(props.subagent_timeout.to_seconds())
            ).variable(),
        }
        code = function_code(props.function_code_dir)

        def function(name: str, handler: str, timeout: Duration, agent: str | None = None, grants: bool = True) -> lambda_.Function:
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
            if grants:
                grant_access(self, fn, ACCESS[name], props, agent)
                approval_environment(fn, ACCESS[name], props)
            return fn

        short = Duration.seconds(30)
        self.init_run = function("InitRun", "longstep_functions.init_run.lambda_handler", short)
        self.model_turn = function("ModelTurn", MODEL_TURN_HANDLER, props.model_timeout)
        self.request_approval = function("RequestApproval", "longstep_functions.request_approval.lambda_handler", short)
        self.escalate = function("Escalate", "longstep_functions.escalate.lambda_handler", short)
        self.wait_for_event = function("WaitForEvent", "longstep_functions.wait_for_event.lambda_handler", short)
        self.continue_as_new = function("ContinueAsNew", "longstep_functions.continue_as_new.lambda_handler", short)
        self.finish = function("Finish", "longstep_functions.finish.lambda_handler", short)
        self.pause = function("Pause", "longstep_functions.pause.lambda_handler", short)
        self.delegate_to_subagent = function("DelegateToSubagent", "longstep_functions.delegate_to_subagent.lambda_handler", short)
        self.delegate_to_subagent.add_environment(ENV_MAX_DEPTH, str(props.subagent_max_depth))
        self.delegate_to_subagent.add_environment(ENV_MAX_CHILDREN, str(props.subagent_max_children))
        self.child_failed = function("ChildFailed", "longstep_functions.child_failed.lambda_handler", short)
        self.fleet_gate = fleet_function(props.fleet, lambda: function("FleetGate", "longstep_functions.fleet_gate.lambda_handler", short))
        # Each agent's tool code (its tools, and the conditions that read its world) runs in
        # functions of its own, whose roles alone hold the agent's declared grants.
        self.agent_functions: dict[str, AgentTaskFunctions] = {}
        for agent in sorted(props.agents):
            # An agent declaring no conditions: the state machine still binds a CheckCondition
            # function (BindAgent), which answers "unknown condition" and is granted nothing.
            checks = props.agent_conditions is None or bool(props.agent_conditions.get(agent))
            inline = props.agent_inline_tools.get(agent)
            tasks = AgentTaskFunctions(
                call_tool=function("CallTool", "longstep_functions.call_tool.lambda_handler", props.tool_timeout, agent),
                call_tool_eval=function("CallToolEval", "longstep_functions.call_tool_eval.lambda_handler", props.tool_timeout, agent),
                check_condition=function("CheckCondition", "longstep_functions.check_condition.lambda_handler", short, agent, grants=checks),
                model_turn=own_model_turn(self, function("ModelTurn", MODEL_TURN_HANDLER, props.model_timeout, agent), agent, inline, props)
                if inline
                else None,
            )
            tasks.check_condition.add_environment(ENV_CONDITION_CHECKS, str(condition_checks_per_execution()))
            resources = props.agent_resources.get(agent)
            for fn in (tasks.call_tool, tasks.check_condition):
                if resources is not None and (checks or fn is tasks.call_tool):
                    resources.bind(fn)
                else:
                    fn.add_environment(ENV_AGENT, agent)
            if resources is not None:  # an eval run's tools may read the agent's world, never write it
                resources.bind_reads(tasks.call_tool_eval)
            else:
                tasks.call_tool_eval.add_environment(ENV_AGENT, agent)
            if resources is not None:  # Init lists the agent's MCP tools with their servers' credentials
                resources.bind_catalog_secrets(self.init_run)
            self.agent_functions[agent] = tasks
        grant_models(self, self.model_turn, props)
        configure_providers(self.model_turn, props.model_providers)
        # The definition calls each function's version published by this deploy (qualified ARNs):
        # an execution keeps the code it started with (docs/deploy.md "Pinning").
        pinned = {
            agent: AgentTaskFunctions(
                call_tool=tasks.call_tool.current_version,
                call_tool_eval=tasks.call_tool_eval.current_version,
                check_condition=tasks.check_condition.current_version,
                model_turn=None if tasks.model_turn is None else tasks.model_turn.current_version,
            )
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
                pause=LoopFunction(self.pause.current_version, short),
                delegate=LoopFunction(self.delegate_to_subagent.current_version, short),
                child_failed=LoopFunction(self.child_failed.current_version, short),
                fleet=LoopFunction(self.fleet_gate.current_version, short) if self.fleet_gate else None,
                agents=pinned,
                call_tool_timeout=props.tool_timeout,
                check_condition_timeout=short,
            ),
            approval_timeout=props.approval_timeout,
            escalation_timeout=props.escalation_timeout,
            max_concurrency=props.map_max_concurrency,
            retry=props.retry,
            subagent_timeout=props.subagent_timeout,
            fleet=props.fleet,
        )
        sm_logs = logs.LogGroup(
            self,
            "StateMachineLogs",
            log_group_name=state_machine_log_group_name(self),
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
        encrypt_executions(self, "ExecutionKey", self.state_machine, props.encryption_key)
        # Every version of every loop function: an execution pinned to an older state machine
        # version calls the function versions it was deployed with, after later deploys have
        # replaced this policy (the tasks' own grants name this deploy's versions only).
        self.state_machine.add_to_role_policy(
            iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[f"{fn.function_arn}:*" for fn in self.functions.values()])
        )
        self._publish(props.compatible_code_versions)
        acknowledge_state_machine_findings(self.state_machine, self.functions)
        grant_state_machine_calls(self, self.state_machine, self.functions)
        if self.fleet_gate is not None:
            grant_fleet(self, self.fleet_gate, self.state_machine)

    def _publish(self, compatible_code_versions: tuple[str, ...]) -> None:
        """This deploy's state machine version and the alias runs start on (``constructs.pinned``)."""
        self.version, self.alias = publish_version(self, self.state_machine, describe_compatible(compatible_code_versions))

    @property
    def functions(self) -> dict[str, lambda_.Function]:
        """The loop's functions by construct id (``InitRun``, ``ModelTurn``..., ``CallTool-<agent>``)."""
        shared = {name: getattr(self, _attribute(name)) for name in ACCESS if name not in PER_AGENT and getattr(self, _attribute(name))}
        for agent, tasks in self.agent_functions.items():
            shared[f"CallTool-{agent}"] = tasks.call_tool
            shared[f"CallToolEval-{agent}"] = tasks.call_tool_eval
            shared[f"CheckCondition-{agent}"] = tasks.check_condition
            if tasks.model_turn is not None:
                shared[f"ModelTurn-{agent}"] = tasks.model_turn
        return shared


def _attribute(construct_id: str) -> str:
    """``RequestApproval`` -> ``request_approval``: the attribute holding that function."""
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in construct_id).lstrip("_")
