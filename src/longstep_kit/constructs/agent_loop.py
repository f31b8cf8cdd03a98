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

from longstep.subagents import CHILD_FAILED_ERROR, SUBAGENT_WAIT
from longstep_kit.retry import RetryPolicies, RetryPolicy

ABORTED_ERROR = "EscalationAborted"
UNANSWERED_ERROR = "EscalationTimedOut"
# A condition wait that spent its execution's check budget fails its Map iteration with this
# error; the Map's Catch hands the run over to a fresh execution (ContinueAsNew).
CONDITION_HANDOVER_ERROR = "ConditionWaitHandover"
HISTORY_EVENT_LIMIT = 25_000
HISTORY_EVENT_MARGIN = 1_000  # Init, the hand-over, and slack
# Events kept for condition checks in each execution (all its condition waits together).
CONDITION_EVENT_RESERVE = 5_000


def history_events_per_check(retries_per_task: int = 2) -> int:
    """Worst-case history events of one condition check: the CheckCondition task (5, plus 3 per
    retry), ConditionChecked (2), ConditionSettled (2) and the WaitBackoff state (2)."""
    return 5 + 3 * retries_per_task + 2 + 2 + 2


def condition_checks_per_execution() -> int:
    """Checks an execution may make before a condition wait hands the run over."""
    return CONDITION_EVENT_RESERVE // history_events_per_check()


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
    """Turns an execution may run before its history could pass 25,000 events (the condition
    checks' reserve left out: they count against a budget of their own)."""
    budget = HISTORY_EVENT_LIMIT - HISTORY_EVENT_MARGIN - CONDITION_EVENT_RESERVE
    return max(1, budget // history_events_per_turn(calls_per_turn))


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
        delegate: the DelegateToSubagent function (None: the loop has no subagent calls).
        child_failed: the function an aborted child run tells its parent through (None: not told).
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
    delegate: LoopFunction | None = None
    child_failed: LoopFunction | None = None


# The workflow variables BindAgent assigns: the run's agent's functions.
CALL_TOOL_VARIABLE = "call_tool_function"
CHECK_CONDITION_VARIABLE = "check_condition_function"


def _invoke_agent_function(
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


def _wait_for_human(
    scope: Construct, cid: str, target: LoopFunction, retry: RetryPolicy, result_path: str, timeout: Duration, comment: str
) -> tasks.LambdaInvoke:
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


def _escalation(
    scope: Construct, prefix: str, failing: sfn.TaskStateBase | sfn.CustomState, fns: LoopFunctions, retry: RetryPolicy, timeout: Duration
) -> None:
    """Catch everything retries could not fix on ``failing``: a human retries, skips or aborts."""
    escalate = _wait_for_human(scope, f"Escalate{prefix}", fns.escalate, retry, "$.resolution", timeout, "Park the failed step until a human answers")
    aborted: sfn.IChainable = sfn.Fail(scope, f"{prefix}Aborted", error=ABORTED_ERROR, cause="a human aborted the run at an escalation")
    # Nobody answered within the escalation timeout: the run fails with an error of its own (the
    # escalation record stays, and `longstep resume` starts the run again from its checkpoints).
    unanswered: sfn.IChainable = sfn.Fail(
        scope, f"{prefix}Unanswered", error=UNANSWERED_ERROR, cause="no human answered the escalation before it timed out"
    )
    if fns.child_failed is not None:
        # A subagent's run tells its parent's waiting call before it fails (a top-level run: a no-op),
        # aborted or unanswered: the parent would otherwise wait for its call's own timeout.
        tell = _invoke(scope, f"{prefix}TellParent", fns.child_failed, retry, comment="A child run tells its parent's call that it failed")
        tell.add_catch(aborted, errors=["States.ALL"], result_path="$.error")  # the run fails all the same
        aborted = tell.next(aborted)
        tell_unanswered = _invoke(
            scope,
            f"{prefix}TellParentUnanswered",
            fns.child_failed,
            retry,
            payload=sfn.TaskInput.from_object({"run_id": sfn.JsonPath.string_at("$.run_id"), "error": {"Error": UNANSWERED_ERROR}}),
            result_path=sfn.JsonPath.DISCARD,
            comment="A child run whose escalation nobody answered tells its parent's call that it failed",
        )
        tell_unanswered.add_catch(unanswered, errors=["States.ALL"], result_path="$.escalation_error")
        unanswered = tell_unanswered.next(unanswered)
    escalate.add_catch(unanswered, errors=["States.Timeout"], result_path="$.escalation_error")
    resolved = sfn.Choice(scope, f"{prefix}Resolved").when(sfn.Condition.string_equals("$.resolution.action", "abort"), aborted).otherwise(failing)
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
    subagent_timeout: Duration = Duration.days(7),
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
        scope,
        "RequestApproval",
        fns.request_approval,
        retry,
        "$.decision",
        approval_timeout,
        "Wait, holding no compute, for a human's decision on this call",
    )
    call_tool = _invoke_agent_function(
        scope,
        "CallTool",
        CALL_TOOL_VARIABLE,
        policies.tool,
        fns.call_tool_timeout,
        "Replay or run one tool call",
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
        scope,
        "CheckCondition",
        CHECK_CONDITION_VARIABLE,
        retry,
        fns.check_condition_timeout,
        "wait_for a condition: one check",
        payload={"item.$": "$", "execution.$": "$$.Execution.Name"},  # checks are counted per execution
        ResultPath="$.check",
    )
    # The check's own result replaces the integration's response (InputPath reads the raw input's
    # $.check.Payload; ResultPath puts it back at $.check of that same raw input).
    unwrap = sfn.Pass(scope, "ConditionChecked", input_path="$.check.Payload", result_path="$.check")
    # A check that still fails after its retries (or times out) ends the wait: the model is told
    # the condition could not be checked, as the call's result (wait_for raises the error).
    check_failed = sfn.Pass(
        scope,
        "ConditionCheckFailed",
        parameters={
            "done": True,
            "met": False,
            "handover": False,
            "error": sfn.JsonPath.format("wait_for: the condition could not be checked ({})", sfn.JsonPath.string_at("$.check_error.Error")),
        },
        result_path="$.check",
    )
    check_condition.add_catch(check_failed, errors=["States.ALL"], result_path="$.check_error")
    check_failed.next(call_tool)
    backoff = sfn.Wait(scope, "WaitBackoff", time=sfn.WaitTime.seconds_path("$.check.next_wait"), comment="exponential backoff between checks")
    # This execution spent its checks: the iteration fails with CONDITION_HANDOVER_ERROR, which
    # the Map catches to hand the run over (the wait resumes in the next execution).
    handover = sfn.Fail(scope, "ConditionHandover", error=CONDITION_HANDOVER_ERROR, cause="the condition checks of this execution are spent")
    check_condition.next(unwrap).next(
        sfn.Choice(scope, "ConditionSettled")
        .when(sfn.Condition.boolean_equals("$.check.done", True), call_tool)
        .when(sfn.Condition.boolean_equals("$.check.handover", True), handover)
        .otherwise(backoff.next(check_condition))
    )
    needs_approval = (
        sfn.Choice(scope, "Dispatch")
        .when(sfn.Condition.boolean_equals("$.approval", True), request_approval.next(call_tool))
        .when(sfn.Condition.string_equals("$.wait", "timer"), wait_timer.next(call_tool))
        .when(sfn.Condition.string_equals("$.wait", "event"), wait_event.next(call_tool))
        .when(sfn.Condition.string_equals("$.wait", "condition"), check_condition)
    )
    if fns.delegate is not None:
        needs_approval.when(
            sfn.Condition.string_equals("$.wait", SUBAGENT_WAIT),
            _delegation(scope, fns.delegate, retry, subagent_timeout, call_tool),
        )
    needs_approval.otherwise(call_tool)
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
    # A condition wait that would pass the history limit: a fresh execution takes the run over;
    # its Init resumes at this turn (its calls are not all recorded) and the wait goes on.
    tool_calls.add_catch(continue_as_new, errors=[CONDITION_HANDOVER_ERROR], result_path="$.handover")
    route = (
        sfn.Choice(scope, "Route")
        .when(sfn.Condition.string_equals("$.route", "tools"), tool_calls.next(model_turn))
        .when(sfn.Condition.string_equals("$.route", "correct"), model_turn)  # feedback, then ask again
        .when(sfn.Condition.string_equals("$.route", "continue"), continue_as_new.next(sfn.Succeed(scope, "HandedOver")))
        .otherwise(finish.next(sfn.Succeed(scope, "Done")))
    )
    init.next(model_turn).next(route)
    return _bind_agent(scope, fns.agents, init)


def _delegation(scope: Construct, target: LoopFunction, retry: RetryPolicy, timeout: Duration, call_tool: sfn.IChainable) -> sfn.Chain:
    """DelegateToSubagent: start the call's child run (an execution of this state machine, named by
    the child's run id) and wait, holding no compute, until the child's Finish answers the token.

    The child's answer lands at ``$.child`` for CallTool to record as the call's result. A child
    that failed answers with SendTaskFailure (error ``SubagentFailed``), caught into ``$.child``;
    no answer within ``timeout`` is caught as well: the model is told either way.
    Task tokens: https://docs.aws.amazon.com/step-functions/latest/dg/connect-to-resource.html#connect-wait-token
    """
    delegate = _invoke(
        scope,
        "DelegateToSubagent",
        target,
        retry,
        integration_pattern=sfn.IntegrationPattern.WAIT_FOR_TASK_TOKEN,
        payload=sfn.TaskInput.from_object(
            {
                "item": sfn.JsonPath.entire_payload,
                "token": sfn.JsonPath.task_token,
                "state_machine_arn": sfn.JsonPath.state_machine_id,
                "execution_name": sfn.JsonPath.execution_name,
            }
        ),
        result_path="$.child",
        task_timeout=sfn.Timeout.duration(timeout),
        comment="Start the subagent's child run; wait, holding no compute, for its Finish to answer",
    )
    timed_out = sfn.Pass(scope, "SubagentTimedOut", result=sfn.Result.from_object({"timed_out": True}), result_path="$.child")
    delegate.add_catch(timed_out, errors=["States.Timeout"], result_path="$.error")
    delegate.add_catch(call_tool, errors=[CHILD_FAILED_ERROR], result_path="$.child")
    timed_out.next(call_tool)
    return delegate.next(call_tool)


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
