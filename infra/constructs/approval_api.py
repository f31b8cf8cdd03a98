"""Humans in the loop: the topic that announces approval requests, and the approval API.

``ApprovalNotifications`` is an SNS topic (encrypted, TLS-only) that ``RequestApproval`` publishes
each request to, with an optional email subscription. ``ApprovalApi`` is an API Gateway REST API
in front of one Lambda (``functions/approval_api.py``, the logic in ``longstep.humans.api``):
list, read and decide approvals, and send signals to runs, every such method with IAM
authorization; and, when the stack gives it a link key, the approval pages
(``constructs/approval_pages.py``: HTML for approvers in a browser, the signed link their
credential, throttled on their own). An EventBridge rule delivers signals too: events of source
``longstep.signal`` and detail-type ``Longstep Signal`` on the kit's signal bus
(``constructs/signal_bus.py``: only the principals a deployer names may put them) invoke a second,
smaller function; what it cannot deliver lands in a dead-letter queue."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from aws_cdk import Acknowledgment, Duration, Stack, Validations
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from longstep_kit.constructs.approval_pages import add_page_routes, grant_page_reads, page_method_options
from longstep_kit.constructs.functions import function_code, agents_variable, runtime_function
from longstep import keys
from longstep import settings as env
from longstep.humans.api import SIGNAL_DETAIL_TYPE
from longstep.links import ENV_LINK_KEY_SECRET
from longstep_kit.constructs.loop_access import KEY_USE
from longstep_kit.constructs.signal_bus import SIGNAL_SOURCE, signal_bus

STAGE_NAME = "v1"
# The routes, as API Gateway resources (path parts) and the methods on them.
ROUTES = {
    ("approvals",): ["GET"],
    ("approvals", "{approval_id}"): ["GET"],
    ("approvals", "{approval_id}", "decision"): ["POST"],
    ("runs", "{run_id}", "signals", "{event}"): ["POST"],
}
# longstep/humans/signals.py: the run's records read, an entry put in the event's queue (put-once),
# the queue read, the head updated.
_SIGNALS = ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem")


@dataclass(frozen=True)
class ApprovalNotificationsProps:
    """Who hears of approval requests.

    Attributes:
        email: an address to subscribe (it must confirm the subscription); None: nobody.
        encryption_key: the customer-managed key to encrypt the topic with; the AWS-managed SNS
            key (``alias/aws/sns``) when None.
    """

    email: str | None = None
    encryption_key: kms.IKey | None = None


class ApprovalNotifications(Construct):
    """The topic each approval request is published to (never with its task token).

    Attributes:
        topic: the topic.
    """

    def __init__(self, scope: Construct, cid: str, props: ApprovalNotificationsProps) -> None:
        super().__init__(scope, cid)
        key = props.encryption_key or kms.Alias.from_alias_name(self, "SnsKey", "alias/aws/sns")
        self.topic = sns.Topic(self, "Topic", display_name="Longstep approval requests", master_key=key, enforce_ssl=True)
        if props.email:
            self.topic.add_subscription(subscriptions.EmailSubscription(props.email))


@dataclass(frozen=True)
class ApprovalApiProps:
    """What the approval API needs.

    Attributes:
        layer: the runtime layer.
        approvals: the approvals table.
        checkpoints: the checkpoint table (signals are recorded there).
        state_machine: the agent loop whose task tokens decisions and signals answer.
        retention_days: TTL of the records the API writes.
        memory_mb: Lambda memory.
        log_retention: retention of the functions' and the API's log groups.
        encryption_key: the customer-managed key of the tables and log groups, if any.
        throttling_rate_limit: steady requests per second the stage accepts.
        throttling_burst_limit: the stage's burst of requests.
        cloud_watch_role: create API Gateway's account-wide CloudWatch Logs role (needed once per
            account and region for the stage's execution and access logs).
        stage_logs: the stage writes execution and access logs. API Gateway accepts these only once
            the account has a CloudWatch Logs role for the Region
            (https://docs.aws.amazon.com/apigateway/latest/developerguide/set-up-logging.html).
        function_code_dir: the directory of the functions' code: the entry points and the agents (``longstep_kit.bundling.build_function_code``).
        agents: agent name -> ``module:callable`` (``LONGSTEP_AGENTS``).
    """

    layer: lambda_.ILayerVersion
    approvals: dynamodb.ITable
    checkpoints: dynamodb.ITable
    state_machine: sfn.IStateMachine
    retention_days: int = env.DEFAULT_RETENTION_DAYS
    memory_mb: int = 256
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH
    encryption_key: kms.IKey | None = None
    throttling_rate_limit: int = 20
    throttling_burst_limit: int = 40
    cloud_watch_role: bool = True
    stage_logs: bool = True
    function_code_dir: Path | None = None
    agents: dict[str, str] = field(default_factory=dict)
    # The approval pages (constructs/approval_pages.py): the secret signing their links (None: no
    # pages) and the throttle of each page method.
    link_key: secretsmanager.ISecret | None = None
    page_rate_limit: int = 5
    page_burst_limit: int = 10
    # Who may put signal events on the signal bus (IAM role or user ARNs; none: nobody).
    signal_principals: tuple[str, ...] = ()


class ApprovalApi(Construct):
    """The approval API (REST, IAM auth), its function, and the EventBridge signal rule.

    Attributes:
        api: the REST API.
        handler: the API's function.
        signal_handler: the function the signal rule invokes.
        signal_bus: the bus signal events are put on (``constructs/signal_bus.py``).
        rule: the EventBridge rule (source ``longstep.signal``, detail-type ``Longstep Signal``, on ``signal_bus``).
        dead_letters: where signals that could not be delivered end up.
    """

    def __init__(self, scope: Construct, cid: str, props: ApprovalApiProps) -> None:
        super().__init__(scope, cid)
        self.props = props
        code = function_code(props.function_code_dir)
        base_env = {
            env.ENV_CHECKPOINT_TABLE: props.checkpoints.table_name,
            env.ENV_RETENTION_DAYS: str(props.retention_days),
            env.ENV_SERVICE_NAME: env.SERVICE_NAME,
            env.ENV_AGENTS: agents_variable(props.agents),
            env.ENV_METRICS_NAMESPACE: env.METRICS_NAMESPACE,
        }
        self.handler = self._function(
            "Handler", "longstep_functions.approval_api.lambda_handler", code, {**base_env, env.ENV_APPROVALS_TABLE: props.approvals.table_name}
        )
        approvals_index = f"{props.approvals.table_arn}/index/{keys.APPROVALS_BY_STATUS_INDEX}"
        if props.link_key is not None:  # the approval pages
            props.link_key.grant_read(self.handler)
            self.handler.add_environment(ENV_LINK_KEY_SECRET, props.link_key.secret_arn)
            grant_page_reads(self.handler, props.checkpoints.table_arn)
        for statement in (
            iam.PolicyStatement(actions=["dynamodb:GetItem", "dynamodb:UpdateItem"], resources=[props.approvals.table_arn]),
            iam.PolicyStatement(actions=["dynamodb:Query"], resources=[approvals_index]),
            iam.PolicyStatement(actions=list(_SIGNALS), resources=[props.checkpoints.table_arn]),
        ):
            self.handler.add_to_role_policy(statement)

        self.dead_letters = sqs.Queue(
            self,
            "SignalDeadLetters",
            encryption=sqs.QueueEncryption.KMS if props.encryption_key else sqs.QueueEncryption.SQS_MANAGED,
            encryption_master_key=props.encryption_key,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        Validations.of(self.dead_letters).acknowledge(
            Acknowledgment(
                id="Serverless-SQSRedrivePolicy",
                reason="This queue is itself the dead-letter queue of the signal rule and function: nothing consumes "
                "it automatically, so there is nothing to redrive from it; its messages wait 14 days for a human.",
            )
        )
        self.signal_handler = self._function("SignalHandler", "longstep_functions.approval_api.signal_handler", code, base_env, self.dead_letters)
        self.signal_handler.add_to_role_policy(iam.PolicyStatement(actions=list(_SIGNALS), resources=[props.checkpoints.table_arn]))
        for fn in (self.handler, self.signal_handler):
            fn.add_to_role_policy(iam.PolicyStatement(actions=["states:SendTaskSuccess"], resources=[props.state_machine.state_machine_arn]))
            if props.encryption_key is not None:
                props.encryption_key.grant(fn, *KEY_USE)

        self.signal_bus = signal_bus(self, "SignalBus", props.signal_principals)
        self.rule = events.Rule(
            self,
            "SignalRule",
            description="Deliver 'Longstep Signal' events to runs waiting in wait_for",
            event_bus=self.signal_bus,
            event_pattern=events.EventPattern(source=[SIGNAL_SOURCE], detail_type=[SIGNAL_DETAIL_TYPE]),
        )
        self.rule.add_target(
            targets.LambdaFunction(self.signal_handler, dead_letter_queue=self.dead_letters, retry_attempts=8, max_event_age=Duration.hours(24))
        )
        self.api = self._rest_api()

    @property
    def url(self) -> str:
        """The API's base URL (``https://{id}.execute-api.{region}.{suffix}/v1/``).

        Built from the API's id and the stage name rather than the stage resource, so that it
        names nothing moto's CloudFormation skips.
        """
        stack = Stack.of(self)
        return f"https://{self.api.rest_api_id}.execute-api.{stack.region}.{stack.url_suffix}/{STAGE_NAME}/"

    def _function(
        self, name: str, handler: str, code: lambda_.Code, environment: dict[str, str], dead_letters: sqs.IQueue | None = None
    ) -> lambda_.Function:
        props = self.props
        return runtime_function(
            self,
            name,
            handler=handler,
            code=code,
            layer=props.layer,
            memory_mb=props.memory_mb,
            timeout=Duration.seconds(29),  # API Gateway's integration timeout
            environment=environment,
            log_retention=props.log_retention,
            encryption_key=props.encryption_key,
            no_dlq_reason="API Gateway invokes the function synchronously and returns its errors to the caller, who "
            "retries; a DLQ serves asynchronous invocations only.",
            dead_letters=dead_letters,
        )

    def _rest_api(self) -> apigw.RestApi:
        props = self.props
        stage_logs = props.stage_logs or props.cloud_watch_role
        logging: dict = {}
        if stage_logs:
            access_logs = logs.LogGroup(self, "AccessLogs", retention=props.log_retention, encryption_key=props.encryption_key)
            logging = dict(
                logging_level=apigw.MethodLoggingLevel.ERROR,
                access_log_destination=apigw.LogGroupLogDestination(access_logs),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=True,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=True,
                ),
            )
        api = apigw.RestApi(
            self,
            "Api",
            description="Longstep: decide approval requests and send signals to runs",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            cloud_watch_role=props.cloud_watch_role,
            default_method_options=apigw.MethodOptions(authorization_type=apigw.AuthorizationType.IAM),
            deploy_options=apigw.StageOptions(
                stage_name=STAGE_NAME,
                tracing_enabled=True,
                metrics_enabled=True,
                data_trace_enabled=False,  # request and response bodies stay out of the logs
                throttling_rate_limit=props.throttling_rate_limit,
                throttling_burst_limit=props.throttling_burst_limit,
                method_options=page_method_options(props.page_rate_limit, props.page_burst_limit) if props.link_key else None,
                **logging,
            ),
        )
        # Bodies are validated by the function (a 400 names the field): no method declares a model,
        # so body validation here checks nothing beyond what the function does.
        validator = api.add_request_validator("Validator", validate_request_parameters=True, validate_request_body=True)
        integration = apigw.LambdaIntegration(self.handler, allow_test_invoke=False)
        for path, methods in ROUTES.items():
            resource = api.root
            for part in path:
                resource = resource.get_resource(part) or resource.add_resource(part)
            for method in methods:
                resource.add_method(method, integration, authorization_type=apigw.AuthorizationType.IAM, request_validator=validator)
        if props.link_key is not None:
            add_page_routes(api, integration)  # no IAM: the signed link is the credential
        # CDK's own "Endpoint" output names the stage resource; the stack outputs ``url`` instead.
        api.node.try_remove_child("Endpoint")
        self._acknowledge_api_findings(api, stage_logs)
        return api

    def _acknowledge_api_findings(self, api: apigw.RestApi, stage_logs: bool) -> None:
        if not stage_logs:
            Validations.of(api).acknowledge(
                Acknowledgment(
                    id="AwsSolutions-APIG1",
                    reason="Stage logs are off until the account has API Gateway's CloudWatch Logs role "
                    "(longstep.api_gateway_stage_logs): API Gateway refuses them before, which would fail a "
                    "first deploy; the function's own logs record every decision and signal.",
                ),
                Acknowledgment(
                    id="Serverless-APIGWAccessLogging",
                    reason="Access logs need the account's CloudWatch Logs role "
                    "(longstep.api_gateway_stage_logs); off by default so a first deploy works.",
                ),
                Acknowledgment(
                    id="AwsSolutions-APIG6",
                    reason="Execution logs need the account's CloudWatch Logs role "
                    "(longstep.api_gateway_stage_logs); off by default so a first deploy works.",
                ),
            )
        Validations.of(api).acknowledge(
            Acknowledgment(
                id="AwsSolutions-APIG3",
                reason="Every method uses IAM authorization: only SigV4-signed requests of principals allowed "
                "execute-api:Invoke reach the function, and the stage throttles them; a WAF web ACL is left to "
                "deployments that expose the API more widely.",
            ),
            Acknowledgment(
                id="AwsSolutions-COG4",
                reason="Approvers are IAM principals (their ARN is the recorded approver): the API uses IAM authorization, not a Cognito user pool.",
            ),
        )
        if api.node.try_find_child("CloudWatchRole") is not None:
            Validations.of(api.node.find_child("CloudWatchRole")).acknowledge(
                Acknowledgment(
                    id="AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs]",
                    reason="API Gateway's account-wide logging role: AmazonAPIGatewayPushToCloudWatchLogs is the "
                    "policy AWS defines for it, and the role is assumable by API Gateway only.",
                )
            )
