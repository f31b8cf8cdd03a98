"""The agent loop's wait states: what a tool call waits on before CallTool records its result.

``wait_for`` a time is a Wait state; an event is a task token a signal answers; a condition on a
system that cannot push is checked, with Wait states (doubling) between checks. A subagent call
waits on a task token its child run's Finish answers. None of them runs anything meanwhile, and
each ends at CallTool, which records what the wait gave (a timeout included) as the call's result.

The timer and event builders return their wait unchained: the caller (``agent_loop``'s Dispatch)
chains it to CallTool, in the order the definition has always made its edges.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from longstep.subagents import CHILD_FAILED_ERROR
from longstep_kit.constructs.loop_tasks import CHECK_CONDITION_VARIABLE, LoopFunction, invoke, invoke_agent_function
from longstep_kit.retry import RetryPolicy

# A condition wait that spent its execution's check budget fails its Map iteration with this
# error; the Map's Catch hands the run over to a fresh execution (ContinueAsNew).
CONDITION_HANDOVER_ERROR = "ConditionWaitHandover"


def timer_wait(scope: Construct) -> sfn.Wait:
    """WaitTimer: until ``$.wait_until`` (the caller chains it to CallTool)."""
    return sfn.Wait(scope, "WaitTimer", time=sfn.WaitTime.timestamp_path("$.wait_until"), comment="wait_for a time")


def event_wait(scope: Construct, target: LoopFunction, retry: RetryPolicy, call_tool: sfn.IChainable) -> tasks.LambdaInvoke:
    """WaitForEvent: parked on a task token until a signal (at ``$.signal``) or ``$.timeout_seconds``,
    whose timeout goes to ``call_tool`` (the caller chains the wait itself to it)."""
    wait_event = invoke(
        scope,
        "WaitForEvent",
        target,
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
    return wait_event


def condition_wait(scope: Construct, timeout: Duration, retry: RetryPolicy, call_tool: sfn.IChainable) -> sfn.IChainable:
    """CheckCondition (the agent's function, ``timeout`` its timeout), then WaitBackoff and again,
    until the check is done (then ``call_tool``) or this execution's checks are spent (handover)."""
    check_condition = invoke_agent_function(
        scope,
        "CheckCondition",
        CHECK_CONDITION_VARIABLE,
        retry,
        timeout,
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
    return check_condition


def delegation(scope: Construct, target: LoopFunction, retry: RetryPolicy, timeout: Duration, call_tool: sfn.IChainable) -> sfn.Chain:
    """DelegateToSubagent: start the call's child run (an execution of this state machine, named by
    the child's run id) and wait, holding no compute, until the child's Finish answers the token.

    The child's answer lands at ``$.child`` for CallTool to record as the call's result. A child
    that failed answers with SendTaskFailure (error ``SubagentFailed``), caught into ``$.child``;
    no answer within ``timeout`` is caught as well: the model is told either way.
    Task tokens: https://docs.aws.amazon.com/step-functions/latest/dg/connect-to-resource.html#connect-wait-token
    """
    delegate = invoke(
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
