"""The state machine definition of the agent loop (DESIGN.md §1).

BindAgent -> Init -> ModelTurn -> Route -> ToolCalls (Map: [RequestApproval ->] CallTool) -> ModelTurn ...
                           -> Finish -> Done
ModelTurn and CallTool failures that retries cannot fix park on an Escalate task (a task token:
no compute while a human decides) and come back to the same step, or abort the run.
The state carries a cursor (run id, next turn, the turn's call indices), never the transcript.

Each agent's tool code runs in functions of its own (its CallTool and CheckCondition, whose roles
hold only that agent's grants). BindAgent, the first state, picks the run's agent from the start
input and stores those two functions' ARNs in workflow variables; the CallTool and CheckCondition
tasks invoke the function a variable names (``FunctionName.$``). Variables assigned at the top
level are readable inside the Map's iterations, and every execution (a continue-as-new one too)
starts at BindAgent:
https://docs.aws.amazon.com/step-functions/latest/dg/workflow-variables.html
A start input naming no registered agent goes straight to Init, which rejects it.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Aws, Duration
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from longstep_kit.retry import RetryPolicies, RetryPolicy

ABORTED_ERROR = "EscalationAborted"
HISTORY_EVENT_LIMIT = 25_000
HISTORY_EVENT_MARGIN = 1_000  # Init, the hand-over, and slack


def history_events_per_turn(calls_per_turn: int, retries_per_task: int = 2) -> int:
    """Worst-case history events one turn adds, counting the states of this definition.

    A Lambda task: entered, scheduled, started, succeeded, exited (5), plus scheduled, started,
    failed (3) per retry; a task-token task adds submitted. Route: 2. Map: 4, and per call an
    iteration's start and end (2), Dispatch (2), a waiting task (6) and CallTool (5).
    """
    retry = 3 * retries_per_task
    model = 5 + retry
    per_call = 2 + 2 + 6 + 5 + 2 * retry
    return model + 2 + 4 + calls_per_turn * per_call


def turns_per_execution(calls_per_turn: int) -> int:
    """Turns an execution may run before its history could pass 25,000 events."""
    return max(1, (HISTORY_EVENT_LIMIT - HISTORY_EVENT_MARGIN) // history_events_per_turn(calls_per_turn))


@dataclass(frozen=True)
class LoopFunction:
    """A function behind a task, with the timeout its retry budget is computed from."""

    fn: lambda_.IFunction
    timeout: Duration


@dataclass(frozen=True)
class AgentTaskFunctions:
    """The functions that run one agent's tool code."""

    call_tool: lambda_.IFunction
    check_condition: lambda_.IFunction


@dataclass(frozen=True)
class LoopFunctions:
    """The Lambda functions behind the loop's tasks.

    Attributes:
        agents: agent name -> its CallTool and CheckCondition functions.
        call_tool_timeout: the CallTool functions' timeout (their lock-wait budget is computed from it).
        check_condition_timeout: the CheckCondition functions' timeout.
    """

    init_run: LoopFunction
    model_turn: LoopFunction
    request_approval: LoopFunction
    escalate: LoopFunction
    wait_for_event: LoopFunction
    continue_as_new: LoopFunction
    finish: LoopFunction
    agents: dict[str, AgentTaskFunctions]
    call_tool_timeout: Duration
    check_condition_timeout: Duration


# The workflow variables BindAgent assigns: the run's agent's functions.
CALL_TOOL_VARIABLE = "call_tool_function"
CHECK_CONDITION_VARIABLE = "check_condition_function"


def _invoke_agent_function(
    scope: Construct, cid: str, variable: str, retry: RetryPolicy, timeout: Duration, comment: str, **fields: str
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
            "Parameters": {"FunctionName.$": f"${variable}", "Payload.$": "$"},
            **fields,
        },
    )
    retry.apply(task, timeout)
    return task


def _invoke(scope: Construct, cid: str, target: LoopFunction, retry: RetryPolicy, **kwargs) -> tasks.LambdaInvoke:
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


def _wait_for_human(scope: Construct, cid: str, target: LoopFunction, retry: RetryPolicy, result_path: str, timeout: Duration, comment: str) -> tasks.LambdaInvoke:
    return _invoke(
        scope,
        cid,
        target,
        retry,
        integration_pattern=sfn.IntegrationPattern.WAIT_FOR_TASK_TOKEN,
        payload=sfn.TaskInput.from_object({"item": sfn.JsonPath.entire_payload, "token": sfn.JsonPath.task_token}),
        result_path=result_path,
        task_timeout=sfn.Timeout.duration(timeout),
        comment=comment,
    )


def _escalation(scope: Construct, prefix: str, failing: sfn.TaskStateBase | sfn.CustomState, fns: LoopFunctions, retry: RetryPolicy, timeout: Duration) -> None:
    """Catch everything retries could not fix on ``failing``: a human retries, skips or aborts."""
    escalate = _wait_for_human(
        scope, f"Escalate{prefix}", fns.escalate, retry, "$.resolution", timeout, "Park the failed step until a human answers"
    )
    aborted = sfn.Fail(scope, f"{prefix}Aborted", error=ABORTED_ERROR, cause="a human aborted the run at an escalation")
    resolved = (
        sfn.Choice(scope, f"{prefix}Resolved")
        .when(sfn.Condition.string_equals("$.resolution.action", "abort"), aborted)
        .otherwise(failing)
    )
    failing.add_catch(escalate, errors=["States.ALL"], result_path="$.error")
    escalate.next(resolved)


def build_definition(
    scope: Construct,
    fns: LoopFunctions,
    *,
    approval_timeout: Duration,
    escalation_timeout: Duration = Duration.days(7),
    max_concurrency: int,
    retry: RetryPolicies | None = None,
) -> sfn.IChainable:
    """The loop's states, chained. ``retry`` gives each step kind its transient-error budget."""
    policies = retry or RetryPolicies()
    retry = policies.bookkeeping
    init = _invoke(scope, "Init", fns.init_run, retry, comment="Create or resume the run; find the first unfinished turn")
    model_turn = _invoke(
        scope,
        "ModelTurn",
        fns.model_turn,
        policies.model,
        payload=sfn.TaskInput.from_object(
            {
                "run_id": sfn.JsonPath.string_at("$.run_id"),
                "next_turn": sfn.JsonPath.number_at("$.next_turn"),
                "resolution": sfn.JsonPath.object_at("$.resolution"),
                "generation": sfn.JsonPath.number_at("$.generation"),
                "generation_start": sfn.JsonPath.number_at("$.generation_start"),
            }
        ),
        comment="Replay or make this turn's model call",
    )
    _escalation(scope, "ModelTurn", model_turn, fns, retry, escalation_timeout)
    request_approval = _wait_for_human(
        scope, "RequestApproval", fns.request_approval, retry, "$.decision", approval_timeout,
        "Wait, holding no compute, for a human's decision on this call",
    )
    call_tool = _invoke_agent_function(
        scope, "CallTool", CALL_TOOL_VARIABLE, policies.tool, fns.call_tool_timeout, "Replay or run one tool call",
        OutputPath="$.Payload",
    )
    _escalation(scope, "CallTool", call_tool, fns, retry, escalation_timeout)
    # No decision in time: the model is told, as the call's result.
    approval_timed_out = sfn.Pass(scope, "ApprovalTimedOut", result=sfn.Result.from_object({"decision": "timeout"}), result_path="$.decision")
    request_approval.add_catch(approval_timed_out, errors=["States.Timeout"], result_path="$.error")
    approval_timed_out.next(call_tool)
    # wait_for: a timer is a Wait state; an event is a task token. Neither runs anything meanwhile.
    wait_timer = sfn.Wait(scope, "WaitTimer", time=sfn.WaitTime.timestamp_path("$.wait_until"), comment="wait_for a time")
    wait_event = _invoke(
        scope,
        "WaitForEvent",
        fns.wait_for_event,
        retry,
        integration_pattern=sfn.IntegrationPattern.WAIT_FOR_TASK_TOKEN,
        payload=sfn.TaskInput.from_object({"item": sfn.JsonPath.entire_payload, "token": sfn.JsonPath.task_token}),
        result_path="$.signal",
        task_timeout=sfn.Timeout.at("$.timeout_seconds"),
        comment="wait_for an event: parked on a task token until a signal arrives",
    )
    event_timed_out = sfn.Pass(scope, "EventTimedOut", result=sfn.Result.from_object({"timed_out": True}), result_path="$.signal")
    wait_event.add_catch(event_timed_out, errors=["States.Timeout"], result_path="$.error")
    event_timed_out.next(call_tool)
    # A condition on a system that cannot push: check, wait (doubling), check again, until met or
    # timed out. The waits are Wait states: nothing runs between checks.
    check_condition = _invoke_agent_function(
        scope, "CheckCondition", CHECK_CONDITION_VARIABLE, retry, fns.check_condition_timeout, "wait_for a condition: one check",
        ResultPath="$.check",
    )
    # The check's own result replaces the integration's response (InputPath reads the raw input's
    # $.check.Payload; ResultPath puts it back at $.check of that same raw input).
    unwrap = sfn.Pass(scope, "ConditionChecked", input_path="$.check.Payload", result_path="$.check")
    backoff = sfn.Wait(scope, "WaitBackoff", time=sfn.WaitTime.seconds_path("$.check.next_wait"), comment="exponential backoff between checks")
    check_condition.next(unwrap).next(
        sfn.Choice(scope, "ConditionSettled")
        .when(sfn.Condition.boolean_equals("$.check.done", True), call_tool)
        .otherwise(backoff.next(check_condition))
    )
    needs_approval = (
        sfn.Choice(scope, "Dispatch")
        .when(sfn.Condition.boolean_equals("$.approval", True), request_approval.next(call_tool))
        .when(sfn.Condition.string_equals("$.wait", "timer"), wait_timer.next(call_tool))
        .when(sfn.Condition.string_equals("$.wait", "event"), wait_event.next(call_tool))
        .when(sfn.Condition.string_equals("$.wait", "condition"), check_condition)
        .otherwise(call_tool)
    )
    tool_calls = sfn.Map(
        scope,
        "ToolCalls",
        items_path="$.calls",
        max_concurrency=max_concurrency,
        result_path=sfn.JsonPath.DISCARD,
        comment="One CallTool per tool call of the turn; results live in the checkpoint table",
    )
    tool_calls.item_processor(needs_approval)
    finish = _invoke(scope, "Finish", fns.finish, retry, comment="Record and return the final answer")
    # Before the history could reach 25,000 events, a fresh execution takes the run over.
    continue_as_new = _invoke(
        scope,
        "ContinueAsNew",
        fns.continue_as_new,
        retry,
        payload=sfn.TaskInput.from_object(
            {
                "cursor": sfn.JsonPath.entire_payload,
                "state_machine_arn": sfn.JsonPath.state_machine_id,
                "execution_name": sfn.JsonPath.execution_name,
                # Which state machine version this execution runs (longstep.pinning).
                "execution_arn": sfn.JsonPath.execution_id,
            }
        ),
        comment="Start the run's next execution; it resumes from the checkpoint log",
    )
    route = (
        sfn.Choice(scope, "Route")
        .when(sfn.Condition.string_equals("$.route", "tools"), tool_calls.next(model_turn))
        .when(sfn.Condition.string_equals("$.route", "correct"), model_turn)  # feedback, then ask again
        .when(sfn.Condition.string_equals("$.route", "continue"), continue_as_new.next(sfn.Succeed(scope, "HandedOver")))
        .otherwise(finish.next(sfn.Succeed(scope, "Done")))
    )
    init.next(model_turn).next(route)
    return _bind_agent(scope, fns.agents, init)


def _bind_agent(scope: Construct, agents: dict[str, AgentTaskFunctions], init: sfn.IChainable) -> sfn.Choice:
    """The first state: the run's agent's functions into workflow variables, then Init.

    A Choice rule on a field the input lacks is a runtime error, so a start input without
    ``agent`` is sent on first, for Init to reject with a message naming the field.
    """
    bind = sfn.Choice(scope, "BindAgent", comment="Store the run's agent's tool functions in variables")
    bind.when(sfn.Condition.not_(sfn.Condition.is_present("$.agent")), init)
    for name, functions in sorted(agents.items()):
        assign = sfn.Pass(
            scope,
            f"BindAgent-{name}",
            assign={
                CALL_TOOL_VARIABLE: functions.call_tool.function_arn,
                CHECK_CONDITION_VARIABLE: functions.check_condition.function_arn,
            },
        )
        bind.when(sfn.Condition.string_equals("$.agent", name), assign.next(init))
    return bind.otherwise(init)
