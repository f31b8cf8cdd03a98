"""A CloudWatch dashboard and alarms for a durable agent.

Every alarm watches a metric that is emitted today: Step Functions' execution metrics, Lambda's
error metric, and the runtime's own metrics (``longstep.observability``: namespace ``Longstep``,
dimension ``service``). Each alarm notifies ``alarm_topic`` (an SNS topic; its subscribers come
from ``longstep.alarm_emails``); CloudWatch also sends every alarm state change to EventBridge.

CloudWatch can publish to an encrypted topic only if the key policy lets ``cloudwatch.amazonaws.com``
use the key, which the AWS-managed ``aws/sns`` key never does
(https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html#compatibility-with-aws-services):
so the topic is encrypted with the stack's customer-managed key when there is one (granted to
CloudWatch for this account's alarms), and otherwise left without at-rest encryption.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Acknowledgment, Duration, Stack, Validations
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from longstep.observability import metrics
from longstep.pinning import ALIAS_NAME
from longstep import settings as env
from longstep.tools.registry import Effect


@dataclass(frozen=True)
class AgentObservabilityProps:
    """What to watch.

    Attributes:
        state_machine: the agent loop.
        functions: the loop's functions by name.
        service: the ``service`` dimension of the runtime's metrics (``POWERTOOLS_SERVICE_NAME``).
        namespace: the runtime's metric namespace (``POWERTOOLS_METRICS_NAMESPACE``).
        period: the alarms' evaluation period and the graphs' resolution.
        lambda_errors_threshold: function errors per period (all functions together) that raise
            the alarm; transient errors are retried by Step Functions, so a few are normal.
        alarm_emails: addresses subscribed (by email, once each confirms) to the alarm topic.
        encryption_key: the stack's customer-managed key, if any (the alarm topic uses it).
    """

    state_machine: sfn.IStateMachine
    functions: dict[str, lambda_.IFunction]
    service: str = env.SERVICE_NAME
    namespace: str = env.METRICS_NAMESPACE
    period: Duration = Duration.minutes(5)
    lambda_errors_threshold: int = 5
    alarm_emails: tuple[str, ...] = ()
    encryption_key: kms.IKey | None = None


class AgentObservability(Construct):
    """Alarms on failed and timed-out executions, function errors and escalations, and a dashboard.

    Attributes:
        alarms: every alarm (each notifies ``alarm_topic``).
        alarm_topic: the topic the alarms notify.
        dashboard: the dashboard.
    """

    def __init__(self, scope: Construct, cid: str, props: AgentObservabilityProps) -> None:
        super().__init__(scope, cid)
        self.props = props
        machine, period = props.state_machine, props.period
        failed = self._executions("ExecutionsFailed", "Failed executions")
        timed_out = self._executions("ExecutionsTimedOut", "Timed-out executions")
        errors_by_fn = {name: fn.metric_errors(period=period, statistic="Sum") for name, fn in props.functions.items()}
        # An alarm's math expression may use at most 10 metrics, so the shared functions get one
        # alarm and each agent's own functions (``CallTool-<agent>``...) one of their own.
        groups: dict[str, dict[str, cw.IMetric]] = {}
        for name, metric in errors_by_fn.items():
            groups.setdefault(name.partition("-")[2], {})[name] = metric

        def errors_sum(label: str, group: dict[str, cw.IMetric]) -> cw.MathExpression:
            return cw.MathExpression(
                expression=" + ".join(f"FILL(e{i}, 0)" for i in range(len(group))),
                using_metrics={f"e{i}": metric for i, metric in enumerate(group.values())},
                label=label,
                period=period,
            )

        escalations = self._metric(metrics.ESCALATIONS)

        def alarm(alarm_id: str, metric: cw.IMetric, threshold: float, description: str) -> cw.Alarm:
            return cw.Alarm(
                self,
                alarm_id,
                metric=metric,
                threshold=threshold,
                evaluation_periods=1,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
                alarm_description=description,
            )

        self.alarms = [
            alarm("ExecutionsFailed", failed, 1, "A run failed: an uncaught error, an escalation nobody answered in time, or an aborted one."),
            alarm("ExecutionsTimedOut", timed_out, 1, "A run exceeded its execution timeout."),
            # Ten shared functions a group: a fleet's FleetGate is the eleventh (a second alarm).
            *(
                alarm(
                    "FunctionErrors" + (f"{n + 1}" if n else ""),
                    errors_sum("Function errors", dict(chunk)),
                    props.lambda_errors_threshold,
                    "The loop's functions raised errors (transient ones are retried).",
                )
                for n, chunk in enumerate(_chunks(list(groups.pop("", {}).items()), 10))
            ),
            *(
                alarm(
                    f"FunctionErrors-{agent}",
                    errors_sum(f"Function errors ({agent})", group),
                    props.lambda_errors_threshold,
                    f"The functions running agent {agent}'s tools and conditions raised errors (transient ones are retried).",
                )
                for agent, group in sorted(groups.items())
            ),
            alarm("Escalations", escalations, 1, "A step failed for good and waits for a human (longstep escalations)."),
        ]

        self.alarm_topic = self._alarm_topic()
        for each in self.alarms:
            each.add_alarm_action(cw_actions.SnsAction(self.alarm_topic))

        # No alarm widget: it would reference the alarms' ARNs, and the local stack (moto) skips
        # alarms, so the dashboard could not deploy there. The console lists the alarms.
        self.dashboard = cw.Dashboard(self, "Dashboard", default_interval=Duration.hours(6))
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Executions",
                left=[
                    machine.metric_started(period=period, statistic="Sum"),
                    machine.metric_succeeded(period=period, statistic="Sum"),
                    failed,
                    timed_out,
                    machine.metric_aborted(period=period, statistic="Sum"),
                ],
                width=8,
            ),
            cw.GraphWidget(title="Function errors", left=list(errors_by_fn.values()), width=8),
            cw.GraphWidget(
                title="Function duration (p99)",
                left=[fn.metric_duration(period=period, statistic="p99") for fn in props.functions.values()],
                width=8,
            ),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Model tokens",
                left=[self._metric(metrics.MODEL_INPUT_TOKENS), self._metric(metrics.MODEL_OUTPUT_TOKENS)],
                width=8,
            ),
            cw.GraphWidget(
                title="Tool calls by effect class",
                left=[self._metric(metrics.TOOL_CALLS, **{metrics.EFFECT: effect.value}) for effect in Effect],
                width=8,
            ),
            cw.GraphWidget(
                title="Steps executed and replayed",
                left=[self._metric(metrics.STEPS_EXECUTED), self._metric(metrics.STEPS_REPLAYED)],
                width=8,
            ),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(title="Checkpoint bytes written", left=[self._metric(metrics.CHECKPOINT_BYTES)], width=8),
            cw.GraphWidget(
                title="Approvals and escalations",
                left=[self._metric(metrics.APPROVALS_REQUESTED), escalations],
                width=8,
            ),
            cw.GraphWidget(
                title="Task errors by category",
                left=[self._metric(metrics.TASK_ERRORS, **{metrics.CATEGORY: c}) for c in metrics.ERROR_CATEGORIES],
                width=8,
            ),
        )

    def _alarm_topic(self) -> sns.Topic:
        props = self.props
        topic = sns.Topic(self, "AlarmTopic", display_name="Longstep alarms", master_key=props.encryption_key, enforce_ssl=True)
        for address in props.alarm_emails:
            subscription = topic.add_subscription(subscriptions.EmailSubscription(address))
            Validations.of(subscription).acknowledge(
                Acknowledgment(
                    id="Serverless-SNSRedrivePolicy",
                    reason="An email subscription: SNS retries the delivery itself, and an alarm whose email is "
                    "lost still shows its state in CloudWatch (and in EventBridge).",
                )
            )
        if props.encryption_key is not None:
            stack = Stack.of(self)
            props.encryption_key.add_to_resource_policy(
                iam.PolicyStatement(
                    principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                    actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                    resources=["*"],
                    conditions={"StringEquals": {"aws:SourceAccount": stack.account}},
                )
            )
        else:
            Validations.of(topic).acknowledge(
                Acknowledgment(
                    id="AwsSolutions-SNS2",
                    reason="CloudWatch alarms cannot publish to a topic encrypted with the AWS-managed aws/sns key; "
                    "alarm notifications carry alarm names and metric values, no run data. With "
                    "customer_managed_key the topic uses the stack's key.",
                )
            )
        return topic

    def _executions(self, metric_name: str, label: str) -> cw.MathExpression:
        """An execution metric of the state machine under both values of its one dimension.

        Step Functions' execution metrics have one dimension, ``StateMachineArn``, "the ARN of the
        state machine for the execution in question"
        (https://docs.aws.amazon.com/step-functions/latest/dg/procedure-cw-metrics.html), and an
        execution started on an alias ARN is associated with that alias
        (https://docs.aws.amazon.com/step-functions/latest/dg/execution-alias-version-associate.html).
        Runs start on the alias ``live``; whether their data points carry the alias ARN or the
        unqualified one is not spelled out there, so the alarm sums both: it sees an alias-started
        execution under either, and at a threshold of 1 a point counted twice raises it the same.
        """
        machine, period = self.props.state_machine, self.props.period
        on_alias = cw.Metric(
            namespace="AWS/States",
            metric_name=metric_name,
            dimensions_map={"StateMachineArn": f"{machine.state_machine_arn}:{ALIAS_NAME}"},
            period=period,
            statistic="Sum",
        )
        key = metric_name.lower()  # ids unique within a graph that shows several of these
        return cw.MathExpression(
            expression=f"FILL({key}_unqualified, 0) + FILL({key}_alias, 0)",
            using_metrics={f"{key}_unqualified": machine.metric(metric_name, period=period, statistic="Sum"), f"{key}_alias": on_alias},
            label=label,
            period=period,
        )

    def _metric(self, name: str, **dimensions: str) -> cw.Metric:
        """A runtime metric, with the dimensions its EMF line carries (service, plus any extra)."""
        return cw.Metric(
            namespace=self.props.namespace,
            metric_name=name,
            dimensions_map={"service": self.props.service, **dimensions},
            statistic="Sum",
            period=self.props.period,
        )


def _chunks(items: list, size: int) -> list[list]:
    """``items`` in lists of at most ``size`` (one empty list for none: the alarm is kept)."""
    return [items[i : i + size] for i in range(0, len(items), size)] or [[]]
