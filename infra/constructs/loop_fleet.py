"""The agent loop's fleet states: a concurrency slot per run, and the model's shared rate limit.

Off unless the deployment configures ``fleet`` (``longstep.fleet.FleetSettings``); then:

- **AcquireSlot** after Init (a ``waitForTaskToken`` task): the run is queued for a slot of its
  key and parked, holding no compute, until its turn (``longstep.concurrency``); **ReleaseSlot**
  after Finish gives it back. A run that ends any other way (failed, timed out, aborted by
  StopExecution) gives it back through the EventBridge rule on the execution's status change
  (``ended_rule``): https://docs.aws.amazon.com/eventbridge/latest/ref/events-ref-states.html
- **DrawRate** before each model turn draws from the model's token bucket; a draw that must wait
  goes through **WaitRate**, a Wait state of the seconds the bucket computed
  (``longstep.rate_limit``), no Lambda running meanwhile.

Task tokens: https://docs.aws.amazon.com/step-functions/latest/dg/connect-to-resource.html#connect-wait-token
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from aws_cdk import Acknowledgment, Validations
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from longstep.fleet import FleetSettings
from longstep.settings import ENV_FLEET
from longstep.tasks.fleet_gate import ENDED, STATUS_CHANGE
from longstep_kit.constructs.loop_tasks import LoopFunction, invoke
from longstep_kit.constructs.nag import nag_text
from longstep_kit.constructs.pinned import executions_arn
from longstep_kit.retry import RetryPolicy


@dataclass(frozen=True)
class FleetStates:
    """The fleet's states of one definition; each hook returns what to chain instead."""

    scope: Construct
    target: LoopFunction
    settings: FleetSettings
    retry: RetryPolicy

    def after_init(self, next_state: sfn.IChainable) -> sfn.IChainable:
        """AcquireSlot, then ``next_state`` (``next_state`` alone without a concurrency key)."""
        if self.settings.concurrency is None:
            return next_state
        acquire = invoke(
            self.scope,
            "AcquireSlot",
            self.target,
            self.retry,
            integration_pattern=sfn.IntegrationPattern.WAIT_FOR_TASK_TOKEN,
            payload=sfn.TaskInput.from_object(
                {
                    "op": "acquire",
                    "run_id": sfn.JsonPath.string_at("$.run_id"),
                    "execution": sfn.JsonPath.execution_id,
                    "token": sfn.JsonPath.task_token,
                }
            ),
            result_path=sfn.JsonPath.DISCARD,
            comment="Wait, holding no compute, for a slot of the run's concurrency key",
        )
        acquire.next(next_state)
        return acquire

    def before_model(self, model_turn: sfn.IChainable) -> sfn.IChainable:
        """DrawRate, WaitRate when the bucket says so, then ``model_turn`` (``model_turn``
        alone without rate limits)."""
        if not self.settings.rate_limits:
            return model_turn
        draw = invoke(
            self.scope,
            "DrawRate",
            self.target,
            self.retry,
            payload=sfn.TaskInput.from_object({"op": "draw", "run_id": sfn.JsonPath.string_at("$.run_id")}),
            result_path="$.rate",
            comment="Draw one call from the model's shared rate limit",
        )
        wait = sfn.Wait(self.scope, "WaitRate", time=sfn.WaitTime.seconds_path("$.rate.wait_seconds"), comment="the bucket's wait")
        wait.next(model_turn)
        draw.next(sfn.Choice(self.scope, "RateDrawn").when(sfn.Condition.number_greater_than("$.rate.wait_seconds", 0), wait).otherwise(model_turn))
        return draw

    def before_end(self, end: sfn.IChainable) -> sfn.IChainable:
        """ReleaseSlot, then ``end``."""
        if self.settings.concurrency is None:
            return end
        release = invoke(
            self.scope,
            "ReleaseSlot",
            self.target,
            self.retry,
            payload=sfn.TaskInput.from_object(
                {"op": "release", "run_id": sfn.JsonPath.string_at("$.run_id"), "execution": sfn.JsonPath.execution_id}
            ),
            result_path=sfn.JsonPath.DISCARD,
            comment="Give the run's slot back and wake the next waiter",
        )
        release.next(end)
        return release


def history_events_per_turn(settings: FleetSettings | None, retries_per_task: int = 2) -> int:
    """Worst-case history events the fleet's states add to a turn: DrawRate (a Lambda task: 5,
    and 3 per retry), RateDrawn (2) and WaitRate (2). The slot's two tasks come once an execution
    and fit in the history budget's margin."""
    if settings is None or not settings.rate_limits:
        return 0
    return 5 + 3 * retries_per_task + 2 + 2


def fleet_states(scope: Construct, target: LoopFunction | None, settings: FleetSettings | None, retry: RetryPolicy) -> FleetStates | None:
    """The fleet's states, or None when the deployment has no fleet settings."""
    if target is None or settings is None or (settings.concurrency is None and not settings.rate_limits):
        return None
    return FleetStates(scope, target, settings, retry)


def ended_rule(scope: Construct, state_machine: sfn.IStateMachine, fn: lambda_.IFunction) -> events.Rule:
    """The rule that hands ``fn`` every execution of ``state_machine`` that failed, timed out or
    was aborted: what it held is given back. Events are best effort: the slot of an execution
    whose event is lost is freed by the next pump that finds its key full while a run waits
    (``Slots.reclaim``: it reads the holders' executions), or by ``longstep fleet release``."""
    return events.Rule(
        scope,
        "FleetExecutionEnded",
        event_pattern=events.EventPattern(
            source=["aws.states"],
            detail_type=[STATUS_CHANGE],
            # Versions and aliases are ARNs under the state machine's own.
            detail={"status": list(ENDED), "stateMachineArn": events.Match.prefix(state_machine.state_machine_arn)},
        ),
        targets=[targets.LambdaFunction(fn, retry_attempts=8)],
    )


def fleet_function(settings: FleetSettings | None, build: Callable[[], lambda_.Function]) -> lambda_.Function | None:
    """The FleetGate function (``build`` makes it), with its settings; None when the fleet is off."""
    if settings is None or (settings.concurrency is None and not settings.rate_limits):
        return None
    fn = build()
    fn.add_environment(ENV_FLEET, settings.variable())
    return fn


def grant_fleet(scope: Construct, fn: lambda_.Function, state_machine: sfn.StateMachine) -> None:
    """What FleetGate needs beyond its ``ACCESS`` row: reading the execution of a refused waiter
    or of a holder of a full key (is it still running?), and the rule that tells it of the
    executions that ended without Finish."""
    iam.Policy(
        scope,
        "FleetGateReadsExecutions",
        roles=[fn.role],
        statements=[iam.PolicyStatement(actions=["states:DescribeExecution"], resources=[executions_arn(state_machine)])],
    )
    Validations.of(scope.node.find_child("FleetGateReadsExecutions")).acknowledge(
        Acknowledgment(
            id=f"AwsSolutions-IAM5[Resource::{nag_text(scope, executions_arn(state_machine))}]",
            reason="FleetGate reads the execution of a refused waiter or of a full key's holder; execution names are run ids, not known at deploy time.",
        )
    )
    ended_rule(scope, state_machine, fn)
