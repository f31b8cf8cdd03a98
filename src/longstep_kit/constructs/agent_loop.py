"""The state machine definition of the agent loop (DESIGN.md §1).

Init -> ModelTurn -> Route -> ToolCalls (Map: [RequestApproval ->] CallTool) -> ModelTurn ...
                           -> Finish -> Done
ModelTurn and CallTool failures that retries cannot fix park on an Escalate task (a task token:
no compute while a human decides) and come back to the same step, or abort the run.
The state carries a cursor (run id, next turn, the turn's call indices), never the transcript.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration
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
class LoopFunctions:
    """The Lambda functions behind the loop's tasks."""

    init_run: LoopFunction
    model_turn: LoopFunction
    call_tool: LoopFunction
    request_approval: LoopFunction
    escalate: LoopFunction
    wait_for_event: LoopFunction
    check_condition: LoopFunction
    continue_as_new: LoopFunction
    finish: LoopFunction


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


def _escalation(scope: Construct, prefix: str, failing: tasks.LambdaInvoke, fns: LoopFunctions, retry: RetryPolicy, timeout: Duration) -> None:
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
    call_tool = _invoke(scope, "CallTool", fns.call_tool, policies.tool, comment="Replay or run one tool call")
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
    check_condition = _invoke(scope, "CheckCondition", fns.check_condition, retry, result_path="$.check", comment="wait_for a condition: one check")
    backoff = sfn.Wait(scope, "WaitBackoff", time=sfn.WaitTime.seconds_path("$.check.next_wait"), comment="exponential backoff between checks")
    check_condition.next(
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
    return init.next(model_turn).next(route)
