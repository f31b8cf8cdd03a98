"""The agent loop's Task states: the Lambda functions behind them and the two ways a task invokes one.

A shared function (Init, ModelTurn, the waits' and humans' tasks, Finish...) is fixed in the
definition; an agent's own tool code (CallTool, CheckCondition) runs in functions of that agent's,
which the task finds at run time in a workflow variable (``agent_loop``'s BindAgent sets them).
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Aws, Duration
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from longstep_kit.retry import RetryPolicy

# The workflow variables BindAgent assigns: the run's agent's functions.
CALL_TOOL_VARIABLE = "call_tool_function"
CHECK_CONDITION_VARIABLE = "check_condition_function"
# Only in a definition with an agent that runs read tools inline (``Agent.inline_read_tools``):
# the ModelTurn function of the run's agent (its own, or the shared one).
MODEL_TURN_VARIABLE = "model_turn_function"


@dataclass(frozen=True)
class LoopFunction:
    """A function behind a task, with the timeout its retry budget is computed from."""

    fn: lambda_.IFunction
    timeout: Duration


@dataclass(frozen=True)
class AgentTaskFunctions:
    """The functions that run one agent's tool code (``model_turn``: its own ModelTurn, which runs
    its read tools inline; None: the agent's turns use the shared ModelTurn; ``call_tool_eval``: an
    eval run's CallTool, with the agent's reads only; None: eval runs use ``call_tool``)."""

    call_tool: lambda_.IFunction
    check_condition: lambda_.IFunction
    model_turn: lambda_.IFunction | None = None
    call_tool_eval: lambda_.IFunction | None = None


@dataclass(frozen=True)
class LoopFunctions:
    """The Lambda functions behind the loop's tasks.

    Attributes:
        agents: agent name -> its CallTool and CheckCondition functions.
        call_tool_timeout: the CallTool functions' timeout (their lock-wait budget is computed from it).
        check_condition_timeout: the CheckCondition functions' timeout.
        delegate: the DelegateToSubagent function (None: the loop has no subagent calls).
        child_failed: the function an aborted child run tells its parent through (None: not told).
        fleet: the function of the fleet's states (``loop_fleet``; None: no fleet states).
    """

    init_run: LoopFunction
    model_turn: LoopFunction
    request_approval: LoopFunction
    escalate: LoopFunction
    wait_for_event: LoopFunction
    continue_as_new: LoopFunction
    finish: LoopFunction
    pause: LoopFunction
    agents: dict[str, AgentTaskFunctions]
    call_tool_timeout: Duration
    check_condition_timeout: Duration
    delegate: LoopFunction | None = None
    child_failed: LoopFunction | None = None
    fleet: LoopFunction | None = None


def invoke_agent_function(
    scope: Construct,
    cid: str,
    variable: str,
    retry: RetryPolicy,
    timeout: Duration,
    comment: str,
    payload: dict | None = None,
    **fields: str,
) -> sfn.CustomState:
    """A task invoking the function whose ARN the workflow variable ``variable`` holds.

    The function is chosen at run time, so the task uses the Lambda service integration with
    ``FunctionName.$`` (the plain function-ARN resource must be fixed in the definition); the
    integration wraps the function's return in ``Payload``:
    https://docs.aws.amazon.com/step-functions/latest/dg/connect-lambda.html
    """
    task = sfn.CustomState(
        scope,
        cid,
        state_json={
            "Type": "Task",
            "Comment": comment,
            "Resource": f"arn:{Aws.PARTITION}:states:::lambda:invoke",
            "Parameters": {"FunctionName.$": f"${variable}", **({"Payload": payload} if payload else {"Payload.$": "$"})},
            **fields,
        },
    )
    retry.apply(task, timeout)
    return task


def has_own_model_turn(agents: dict[str, AgentTaskFunctions]) -> bool:
    """Whether an agent has a ModelTurn function of its own (the definition then binds one per run)."""
    return any(functions.model_turn is not None for functions in agents.values())


def model_turn_task(
    scope: Construct, fns: LoopFunctions, retry: RetryPolicy, payload: dict[str, str], comment: str
) -> sfn.TaskStateBase | sfn.CustomState:
    """The ModelTurn task: the shared function, or, when an agent has a ModelTurn of its own (it
    runs read tools inline), the run's agent's, named by ``MODEL_TURN_VARIABLE``.

    ``payload``: the task's input fields (name -> JSONPath). Without an agent of that kind the
    task is what it always was (the default definition does not change).
    """
    if not has_own_model_turn(fns.agents):
        task_input = sfn.TaskInput.from_object({name: sfn.JsonPath.string_at(path) for name, path in payload.items()})
        return invoke(scope, "ModelTurn", fns.model_turn, retry, payload=task_input, comment=comment)
    selected = {f"{name}.$": path for name, path in payload.items()}
    return invoke_agent_function(
        scope, "ModelTurn", MODEL_TURN_VARIABLE, retry, fns.model_turn.timeout, comment, payload=selected, OutputPath="$.Payload"
    )


def invoke(scope: Construct, cid: str, target: LoopFunction, retry: RetryPolicy, **kwargs) -> tasks.LambdaInvoke:
    """A task invoking ``target`` (``kwargs``: ``LambdaInvoke``'s), with ``retry``'s retriers."""
    # payloadResponseOnly gives the plain ``arn:aws:lambda`` resource: the task's output is the
    # handler's return value. A task-token task needs the service integration instead.
    response_only = "integration_pattern" not in kwargs
    task = tasks.LambdaInvoke(
        scope,
        cid,
        lambda_function=target.fn,
        payload_response_only=response_only or None,
        retry_on_service_exceptions=False,
        **kwargs,
    )
    retry.apply(task, target.timeout)
    return task
