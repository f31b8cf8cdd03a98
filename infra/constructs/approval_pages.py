"""The approval pages' infrastructure: the link key (a rotated secret) and the page routes.

``LinkKey`` is a Secrets Manager secret whose value Secrets Manager generates (64 alphanumerics)
and a rotation schedule whose function (``functions/rotate_link_key.py``) puts a fresh key
every ``rotation_days``; the previous key stays valid for verification (``AWSPREVIOUS``), so a
rotation never breaks the links in flight (``longstep.links``). Rotate by hand with
``aws secretsmanager rotate-secret --secret-id ARN`` (the same function runs).

The page routes (``/pages/decide/{link}`` and ``/pages/escalation/{link}`` GET and POST,
``/pages/inbox/{link}`` GET) are added to
the approval API without IAM authorization (the signed link is the credential) and with a tighter
method-level throttle than the stage's, set in the stage's method settings.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, Duration, Validations
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from longstep_kit.constructs.functions import runtime_function
from longstep import settings as env
from longstep.link_key_rotation import KEY_CHARS

DEFAULT_ROTATION_DAYS = 30
# The page routes: path parts -> methods.
PAGE_ROUTES = {
    ("pages", "decide", "{link}"): ["GET", "POST"],
    ("pages", "inbox", "{link}"): ["GET"],
    ("pages", "escalation", "{link}"): ["GET", "POST"],
}
PAGE_RATE_LIMIT = 5  # requests per second, steady, per page method (a person clicks; a scanner floods)
PAGE_BURST_LIMIT = 10


def page_method_options(rate_limit: int = PAGE_RATE_LIMIT, burst_limit: int = PAGE_BURST_LIMIT) -> dict[str, apigw.MethodDeploymentOptions]:
    """The stage's method settings that throttle each page method (``/resource/path/METHOD`` keys).

    Method-level throttling overrides the stage's for those methods:
    https://docs.aws.amazon.com/apigateway/latest/developerguide/api-gateway-request-throttling.html
    """
    return {
        "/" + "/".join(path) + f"/{method}": apigw.MethodDeploymentOptions(throttling_rate_limit=rate_limit, throttling_burst_limit=burst_limit)
        for path, methods in PAGE_ROUTES.items()
        for method in methods
    }


def add_page_routes(api: apigw.RestApi, integration: apigw.Integration) -> list[apigw.Method]:
    """The page methods on ``api``: no IAM authorization (the link is the credential)."""
    added = []
    for path, methods in PAGE_ROUTES.items():
        resource = api.root
        for part in path:
            resource = resource.get_resource(part) or resource.add_resource(part)
        for method in methods:
            created = resource.add_method(method, integration, authorization_type=apigw.AuthorizationType.NONE)
            Validations.of(created).acknowledge(
                Acknowledgment(
                    id="AwsSolutions-APIG4",
                    reason="An approval page is opened from a notification by people without AWS credentials: the "
                    "credential is the HMAC-signed, expiring link in the path (longstep.links), checked by the function; "
                    "deciding also needs the page's CSRF token; the method is throttled on its own.",
                ),
                Acknowledgment(
                    id="AwsSolutions-COG4",
                    reason="The signed link is the page's credential (an approver needs no account); the API's other routes use IAM authorization.",
                ),
            )
            added.append(created)
    return added


class LinkKey(Construct):
    """The secret that signs approval links, rotated by a small function.

    Args:
        layer: the runtime layer (the rotation handler lives in it).
        code: the functions' code asset.
        encryption_key: the customer-managed key for the secret and the function's logs, if any.
        memory_mb: the rotation function's memory.
        rotation_days: how often the key is replaced; a link stays valid across one rotation, so
            this should exceed the approval timeout.

    Attributes:
        secret: the secret (its value: the current key).
        rotation: the rotation function.
    """

    def __init__(
        self,
        scope: Construct,
        cid: str,
        *,
        layer: lambda_.ILayerVersion,
        code: lambda_.Code,
        encryption_key: kms.IKey | None = None,
        rotation_days: int = DEFAULT_ROTATION_DAYS,
        memory_mb: int = 256,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
    ) -> None:
        super().__init__(scope, cid)
        self.secret = secretsmanager.Secret(
            self,
            "Secret",
            description="Longstep: the HMAC key that signs approval page links",
            encryption_key=encryption_key,
            generate_secret_string=secretsmanager.SecretStringGenerator(password_length=KEY_CHARS, exclude_punctuation=True),
        )
        self.rotation = runtime_function(
            self,
            "Rotation",
            handler="longstep_functions.rotate_link_key.lambda_handler",
            code=code,
            layer=layer,
            memory_mb=memory_mb,
            timeout=Duration.seconds(30),
            environment={env.ENV_SERVICE_NAME: env.SERVICE_NAME},
            log_retention=log_retention,
            encryption_key=encryption_key,
            no_dlq_reason="Secrets Manager invokes the rotation function itself, records a failed rotation on the "
            "secret and retries it; a DLQ would hold nothing anyone acts on.",
        )
        # CDK's RotationSchedule grants the function the secret's rotation actions (and Secrets
        # Manager the invoke): DescribeSecret, GetSecretValue, PutSecretValue, UpdateSecretVersionStage
        # on this secret, GetRandomPassword (which names no resource).
        self.secret.add_rotation_schedule("Schedule", rotation_lambda=self.rotation, automatically_after=Duration.days(rotation_days))
        if encryption_key is not None:
            # Not grant_encrypt_decrypt: its wildcard actions are wider than putting and reading a version needs.
            encryption_key.grant(self.rotation, "kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey")
        Validations.of(self.rotation.role).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="secretsmanager:GetRandomPassword names no resource: IAM accepts only '*' for it.",
            )
        )

    def grant_read(self, fn: lambda_.Function, variable: str) -> None:
        """Let ``fn`` read the key, and name the secret in its environment as ``variable``."""
        self.secret.grant_read(fn)
        fn.add_environment(variable, self.secret.secret_arn)


def grant_page_reads(fn: lambda_.Function, checkpoints_arn: str) -> None:
    """What the pages read beyond the JSON API: a run's pending escalations (a Query of its log)."""
    fn.add_to_role_policy(iam.PolicyStatement(actions=["dynamodb:Query"], resources=[checkpoints_arn]))
