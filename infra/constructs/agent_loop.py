"""The state machine definition of the agent loop (DESIGN.md §1).

Init -> ModelTurn -> Route -> ToolCalls (Map: [RequestApproval ->] CallTool) -> ModelTurn ...
                           -> Finish -> Done
The state carries a cursor (run id, next turn, the turn's call indices), never the transcript.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from longstep.errors import retryable_error_names


@dataclass(frozen=True)
class RetryPolicy:
    """Step Functions Retry for transient errors: exponential backoff, full jitter, a capped delay."""

    interval_seconds: int = 1
    max_attempts: int = 6
    backoff_rate: float = 2.0
    max_delay_seconds: int = 60

    def apply(self, state: sfn.TaskStateBase) -> None:
        state.add_retry(
            errors=retryable_error_names(),
            interval=Duration.seconds(self.interval_seconds),
            max_attempts=self.max_attempts,
            backoff_rate=self.backoff_rate,
            max_delay=Duration.seconds(self.max_delay_seconds),
            jitter_strategy=sfn.JitterType.FULL,
        )


@dataclass(frozen=True)
class LoopFunctions:
    """The Lambda functions behind the loop's tasks."""

    init_run: lambda_.IFunction
    model_turn: lambda_.IFunction
    call_tool: lambda_.IFunction
    request_approval: lambda_.IFunction
    finish: lambda_.IFunction


def _invoke(scope: Construct, cid: str, fn: lambda_.IFunction, retry: RetryPolicy, **kwargs) -> tasks.LambdaInvoke:
    # payloadResponseOnly gives the plain ``arn:aws:lambda`` resource: the task's output is the
    # handler's return value. A task-token task needs the service integration instead.
    response_only = "integration_pattern" not in kwargs
    task = tasks.LambdaInvoke(
        scope, cid, lambda_function=fn, payload_response_only=response_only or None, retry_on_service_exceptions=False, **kwargs
    )
    retry.apply(task)
    return task


def build_definition(
    scope: Construct,
    fns: LoopFunctions,
    *,
    approval_timeout: Duration,
    max_concurrency: int,
    retry: RetryPolicy = RetryPolicy(),
) -> sfn.IChainable:
    """The loop's states, chained."""
    init = _invoke(scope, "Init", fns.init_run, retry, comment="Create or resume the run; find the first unfinished turn")
    model_turn = _invoke(
        scope,
        "ModelTurn",
        fns.model_turn,
        retry,
        payload=sfn.TaskInput.from_object({"run_id": sfn.JsonPath.string_at("$.run_id"), "next_turn": sfn.JsonPath.number_at("$.next_turn")}),
        comment="Replay or make this turn's model call",
    )
    request_approval = _invoke(
        scope,
        "RequestApproval",
        fns.request_approval,
        retry,
        integration_pattern=sfn.IntegrationPattern.WAIT_FOR_TASK_TOKEN,
        payload=sfn.TaskInput.from_object({"item": sfn.JsonPath.entire_payload, "token": sfn.JsonPath.task_token}),
        result_path="$.decision",
        task_timeout=sfn.Timeout.duration(approval_timeout),
        comment="Wait, holding no compute, for a human's decision on this call",
    )
    call_tool = _invoke(scope, "CallTool", fns.call_tool, retry, comment="Replay or run one tool call")
    needs_approval = (
        sfn.Choice(scope, "NeedsApproval")
        .when(sfn.Condition.boolean_equals("$.approval", True), request_approval.next(call_tool))
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
    route = (
        sfn.Choice(scope, "Route")
        .when(sfn.Condition.string_equals("$.route", "tools"), tool_calls.next(model_turn))
        .otherwise(finish.next(sfn.Succeed(scope, "Done")))
    )
    return init.next(model_turn).next(route)
