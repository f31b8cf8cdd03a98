"""IAM on the local stack: every AWS call a function makes is checked against its synthesized role.

moto does not evaluate IAM, so a handler that starts using a new action, or a grant on the wrong
resource, passes every local test and fails in AWS. Here the synthesized template is the source
of truth: each role's identity policies (``AWS::IAM::Policy`` and the role's inline policies),
plus the resource policies that apply (S3 bucket policies, SNS topic policies, KMS key policies,
event bus policies), are resolved to real ARNs after the deploy, and a botocore hook checks every call
made while a function's identity is bound (:func:`acting_as`, set by the dispatcher per
invocation) or made by the Step Functions engine (its Lambda invokes run as the state machine's
role). A call the policies do not allow fails with the error code that service returns.

Evaluation follows AWS's policy evaluation logic for a single account
(https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html):
an explicit Deny in any applicable policy wins; otherwise an Allow in the identity policies or
in a resource policy that names the principal allows; otherwise the call is implicitly denied.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from longstep_kit.local.iam_actions import Request, requests_for
from longstep_kit.local.iam_conditions import ContextValue, UnsupportedCondition, as_list, condition_holds, like

__all__ = ["UnsupportedCondition", "condition_holds"]  # the evaluator's errors and conditions, for its callers

# The role whose policies apply to the calls made in this context (None: the local stack itself,
# which acts as an administrator). A contextvar, not a global: the engine runs a Map's tool
# calls on threads, each invocation with its own function.
_acting_role: contextvars.ContextVar[str | None] = contextvars.ContextVar("longstep_acting_role", default=None)

# The error code each service returns for a denied call, and its HTTP status:
# DynamoDB https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/CommonErrors.html,
# S3 https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html (AccessDenied, 403),
# SNS https://docs.aws.amazon.com/sns/latest/api/API_Publish.html (AuthorizationError, 403),
# Step Functions https://docs.aws.amazon.com/step-functions/latest/apireference/CommonErrors.html,
# SQS https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/CommonErrors.html.
DENIED_ERRORS: dict[str, tuple[str, int]] = {
    "dynamodb": ("AccessDeniedException", 400),
    "s3": ("AccessDenied", 403),
    "sns": ("AuthorizationError", 403),
    "sqs": ("AccessDenied", 403),
    "states": ("AccessDeniedException", 400),
    "lambda": ("AccessDeniedException", 403),
    "kms": ("AccessDeniedException", 400),
    "secretsmanager": ("AccessDeniedException", 400),
    "bedrock": ("AccessDeniedException", 403),
    "events": ("AccessDeniedException", 400),
}
SECURE_TRANSPORT = "true"  # boto3 talks HTTPS to AWS: aws:SecureTransport is true for every call.


@contextlib.contextmanager
def acting_as(role_arn: str | None) -> Iterator[None]:
    """Calls made inside run with ``role_arn``'s policies (the dispatcher binds it per invocation)."""
    token = _acting_role.set(role_arn)
    try:
        yield
    finally:
        _acting_role.reset(token)


def acting_role() -> str | None:
    """The role bound to this context, if any."""
    return _acting_role.get()


# -- the template, resolved ---------------------------------------------------------------------


Resolver = Callable[[Any], str]


INTRINSICS = ("Ref", "Fn::GetAtt", "Fn::Join", "Fn::Sub", "Fn::FindInMap")


def template_resolver(
    ref: Callable[[str], str], get_att: Callable[[str, str], str], pseudo: dict[str, str], mappings: dict[str, Any] | None = None
) -> Resolver:
    """A resolver of CloudFormation intrinsics (``Ref``, ``Fn::GetAtt``, ``Fn::Join``, ``Fn::Sub``,
    and ``Fn::FindInMap`` on the template's ``mappings``)."""

    def resolve(node: Any) -> str:
        if isinstance(node, str):
            return node
        if not isinstance(node, dict) or len(node) != 1:
            raise ValueError(f"cannot resolve {node!r}")
        ((fn, arg),) = node.items()
        if fn == "Ref":
            return pseudo[arg] if arg in pseudo else ref(arg)
        if fn == "Fn::GetAtt":
            logical, attribute = arg if isinstance(arg, list) else arg.split(".", 1)
            return get_att(logical, attribute)
        if fn == "Fn::Join":
            separator, parts = arg
            return separator.join(resolve(p) for p in parts)
        if fn == "Fn::Sub" and isinstance(arg, str):
            import re

            return re.sub(r"\$\{([^}]+)\}", lambda m: resolve({"Fn::GetAtt": m.group(1)} if "." in m.group(1) else {"Ref": m.group(1)}), arg)
        if fn == "Fn::FindInMap" and mappings is not None:
            name, top, second = (resolve(part) for part in arg)
            return mappings[name][top][second]
        raise ValueError(f"unsupported intrinsic {fn} in a policy")

    return resolve


def _resources(template: dict[str, Any], type_name: str) -> dict[str, dict[str, Any]]:
    return {lid: r for lid, r in template.get("Resources", {}).items() if r.get("Type") == type_name}


def role_statements(template: dict[str, Any], role_logical_id: str) -> list[dict[str, Any]]:
    """The identity-policy statements of one role, as the template writes them (unresolved)."""
    statements: list[dict[str, Any]] = []
    for kind in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
        for policy in _resources(template, kind).values():
            if {"Ref": role_logical_id} in policy["Properties"].get("Roles", []):
                statements += as_list(policy["Properties"]["PolicyDocument"]["Statement"])
    role = template["Resources"][role_logical_id]["Properties"]
    for inline in role.get("Policies", []):
        statements += as_list(inline["PolicyDocument"]["Statement"])
    return statements


def resolve_statement(statement: dict[str, Any], resolve: Resolver) -> dict[str, Any]:
    """A statement with its resources (and condition values) resolved to strings."""

    def values(node: Any) -> Any:
        if isinstance(node, dict) and len(node) == 1 and next(iter(node)) in INTRINSICS:
            return resolve(node)
        if isinstance(node, dict):
            return {k: values(v) for k, v in node.items()}
        if isinstance(node, list):
            return [values(v) for v in node]
        return node

    return values(statement)


# -- evaluation ---------------------------------------------------------------------------------


def action_matches(action: str, patterns: Any) -> bool:
    """Action names are case-insensitive in IAM."""
    return any(like(action.lower(), p.lower()) for p in as_list(patterns))


def resource_matches(resource: str, patterns: Any) -> bool:
    return any(like(resource, p) for p in as_list(patterns))


def statement_applies(statement: dict[str, Any], action: str, resource: str, context: dict[str, ContextValue]) -> bool:
    if "NotAction" in statement:
        if action_matches(action, statement["NotAction"]):
            return False
    elif not action_matches(action, statement.get("Action", [])):
        return False
    if "NotResource" in statement:
        if resource_matches(resource, statement["NotResource"]):
            return False
    elif not resource_matches(resource, statement.get("Resource", "*")):
        return False
    return condition_holds(statement.get("Condition"), context)


def allowed(statements: list[dict[str, Any]], action: str, resource: str, context: dict[str, ContextValue] | None = None) -> bool:
    """Whether resolved identity ``statements`` allow ``action`` on ``resource`` (and deny nothing)."""
    context = context or {}
    applicable = [s for s in statements if statement_applies(s, action, resource, context)]
    return any(s["Effect"] == "Allow" for s in applicable) and not any(s["Effect"] == "Deny" for s in applicable)


def _names_principal(statement: dict[str, Any], role_arn: str, account: str) -> bool:
    principal = statement.get("Principal")
    if principal == "*":
        return True
    if not isinstance(principal, dict) or "AWS" not in principal:
        return False
    return any(p in ("*", role_arn) for p in as_list(principal["AWS"]))


@dataclass
class ResourcePolicy:
    """A resource-based policy (bucket, topic, key) and the ARNs it is attached to."""

    arns: list[str]
    statements: list[dict[str, Any]]
    # KMS: a key policy must allow the account (then IAM decides) or the principal itself.
    is_key_policy: bool = False

    def covers(self, resource: str) -> bool:
        return any(resource == arn or resource.startswith(arn + "/") for arn in self.arns)


@dataclass
class Decision:
    allowed: bool
    reason: str


@dataclass
class Policies:
    """Every role's resolved identity statements and the resource policies of the stack.

    Attributes:
        roles: role ARN -> its identity statements (resolved).
        resource_policies: the bucket, topic and key policies (resolved).
        engine_roles: the roles of the state machines (their Lambda invokes are checked).
        account: the account id.
    """

    roles: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    resource_policies: list[ResourcePolicy] = field(default_factory=list)
    engine_roles: list[str] = field(default_factory=list)
    account: str = "123456789012"

    def decide(self, role_arn: str, action: str, resource: str, context: dict[str, ContextValue]) -> Decision:
        """AWS's evaluation for a principal and resource of the same account."""
        context = {"aws:SecureTransport": SECURE_TRANSPORT, "aws:PrincipalArn": role_arn, "aws:PrincipalAccount": self.account, **context}
        identity = [s for s in self.roles.get(role_arn, []) if statement_applies(s, action, resource, context)]
        resource_statements = [
            (policy, s)
            for policy in self.resource_policies
            if policy.covers(resource)
            for s in policy.statements
            if statement_applies(s, action, resource, context)
        ]
        if any(s["Effect"] == "Deny" for s in identity) or any(
            s["Effect"] == "Deny" and _names_principal(s, role_arn, self.account) for _, s in resource_statements
        ):
            return Decision(False, "explicit deny")
        key_policies = [p for p in self.resource_policies if p.is_key_policy and p.covers(resource)]
        if key_policies:
            # A key policy is the root of trust: IAM policies count only where it allows the account.
            # https://docs.aws.amazon.com/kms/latest/developerguide/key-policy-default.html
            by_principal = any(s["Effect"] == "Allow" and _names_principal(s, role_arn, self.account) for _, s in resource_statements)
            root = f"arn:aws:iam::{self.account}:root"
            delegates = any(s["Effect"] == "Allow" and root in as_list((s.get("Principal") or {}).get("AWS", [])) for _, s in resource_statements)
            if by_principal or (delegates and any(s["Effect"] == "Allow" for s in identity)):
                return Decision(True, "allowed")
            return Decision(False, "no key policy or identity-based policy allows")
        if any(s["Effect"] == "Allow" for s in identity):
            return Decision(True, "allowed")
        if any(s["Effect"] == "Allow" and _names_principal(s, role_arn, self.account) for _, s in resource_statements):
            return Decision(True, "allowed by a resource-based policy")
        return Decision(False, "no identity-based policy allows")


def policies_from_template(template: dict[str, Any], resolve: Resolver, role_arn: Callable[[str], str], account: str) -> Policies:
    """Build :class:`Policies` from a synthesized template.

    Args:
        template: the CloudFormation template.
        resolve: resolves intrinsics to the deployed names and ARNs.
        role_arn: a role's logical id -> its deployed ARN.
        account: the account id.
    """
    policies = Policies(account=account)
    for logical in _resources(template, "AWS::IAM::Role"):
        policies.roles[role_arn(logical)] = [resolve_statement(s, resolve) for s in role_statements(template, logical)]
    for policy in _resources(template, "AWS::S3::BucketPolicy").values():
        bucket = resolve(policy["Properties"]["Bucket"])
        statements = [resolve_statement(s, resolve) for s in as_list(policy["Properties"]["PolicyDocument"]["Statement"])]
        policies.resource_policies.append(ResourcePolicy([f"arn:aws:s3:::{bucket}"], statements))
    for policy in _resources(template, "AWS::SNS::TopicPolicy").values():
        topics = [resolve(t) for t in policy["Properties"]["Topics"]]
        statements = [resolve_statement(s, resolve) for s in as_list(policy["Properties"]["PolicyDocument"]["Statement"])]
        policies.resource_policies.append(ResourcePolicy(topics, statements))
    region = resolve({"Ref": "AWS::Region"})
    for bus in _resources(template, "AWS::Events::EventBus").values():
        if bus["Properties"].get("Policy"):  # the signal bus: who may put events on it
            arn = f"arn:aws:events:{region}:{account}:event-bus/{resolve(bus['Properties']['Name'])}"
            statements = [resolve_statement(s, resolve) for s in as_list(bus["Properties"]["Policy"]["Statement"])]
            policies.resource_policies.append(ResourcePolicy([arn], statements))
    for logical, key in _resources(template, "AWS::KMS::Key").items():
        document = key["Properties"].get("KeyPolicy")
        if document:
            statements = [resolve_statement(s, resolve) for s in as_list(document["Statement"])]
            policies.resource_policies.append(ResourcePolicy([resolve({"Fn::GetAtt": [logical, "Arn"]})], statements, is_key_policy=True))
    for machine in _resources(template, "AWS::StepFunctions::StateMachine").values():
        policies.engine_roles.append(resolve(machine["Properties"]["RoleArn"]))
    return policies


# -- the botocore hook --------------------------------------------------------------------------


class AccessDeniedError(Exception):
    """Raised by :func:`check` (converted into the service's ClientError by the hook)."""

    def __init__(self, code: str, status: int, message: str) -> None:
        super().__init__(message)
        self.code, self.status = code, status


def check(policies: Policies, role_arn: str, requests: list[Request]) -> None:
    """Raise :class:`AccessDeniedError` for the first request the role may not make."""
    for request in requests:
        decision = policies.decide(role_arn, request.action, request.resource, request.context)
        if decision.allowed:
            continue
        if request.denied_as is not None:  # S3: a missing key without ListBucket is a 403, not a 404
            raise AccessDeniedError(*request.denied_as, "Access Denied")
        if not request.enforced:  # only asked (ListBucket for a missing key): not the call's own action
            continue
        code, status = DENIED_ERRORS.get(request.action.split(":")[0], ("AccessDeniedException", 400))
        session = role_arn.rsplit("/", 1)[-1]
        raise AccessDeniedError(
            code,
            status,
            f"User: arn:aws:sts::{policies.account}:assumed-role/{session}/local is not authorized to perform: "
            f"{request.action} on resource: {request.resource} because {decision.reason} the {request.action} action",
        )


def check_call(policies: Policies, lookup: Any, region: str, service: str, operation: str, params: dict[str, Any], engine: bool) -> None:
    """Raise :class:`AccessDeniedError` if the bound role (or, for ``engine``, the state machine's) may not make this call."""
    role = acting_role()
    if role is None and not engine:
        return  # the local stack itself: an administrator
    requests = requests_for(service, operation, params, region, policies.account, lookup)
    if role is not None:
        check(policies, role, requests)
        return
    # moto's engine makes the Lambda invokes of every state machine: one whose role allows suffices.
    denied: AccessDeniedError | None = None
    for machine_role in policies.engine_roles:
        try:
            check(policies, machine_role, requests)
            return
        except AccessDeniedError as exc:
            denied = exc
    if denied is not None:
        raise denied
