"""The local stack refuses what AWS refuses: installs IAM, limits and the engine patches together.

On by default (``LocalStack(enforce=True)``); ``longstep local run --no-enforce`` turns it off
with a warning. See docs/local-fidelity.md for what is enforced, emulated, or not covered.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from longstep_kit.local import iam, limits
from longstep_kit.local.iam_actions import ENGINE_ACCESS_KEY, MotoLookup
from longstep_kit.local.asl_strictness import MotoPatches

NOT_ENFORCED_WARNING = (
    "warning: AWS enforcement is OFF (--no-enforce): IAM, payload limits and ASL strictness are not checked; a run that passes here may fail in AWS"
)


def warn_not_enforced() -> None:
    """Say, as a Python warning and in the log, that this stack does not refuse what AWS refuses."""
    import logging
    import warnings

    warnings.warn(NOT_ENFORCED_WARNING, stacklevel=3)
    logging.getLogger("longstep_kit.local").warning(NOT_ENFORCED_WARNING)


def deployed_policies(template: dict[str, Any], stack_name: str, account: str, region: str) -> iam.Policies:
    """The template's policies resolved to what moto's CloudFormation deployed (names, ARNs)."""
    from moto.cloudformation.models import cloudformation_backends

    (stack,) = [s for s in cloudformation_backends[account][region].stacks.values() if s.name == stack_name]
    resources = stack.resource_map

    def ref(logical: str) -> str:
        return resources[logical].physical_resource_id

    def get_att(logical: str, attribute: str) -> str:
        resource = resources[logical]
        if attribute == "Arn" and str(resource.physical_resource_id).startswith("arn:"):
            return resource.physical_resource_id  # topics and state machines: their Ref is the ARN
        return resource.get_cfn_attribute(attribute)

    pseudo = {
        "AWS::Partition": "aws",
        "AWS::Region": region,
        "AWS::AccountId": account,
        "AWS::URLSuffix": "amazonaws.com",
        "AWS::StackName": stack_name,
    }
    resolve = iam.template_resolver(ref, get_att, pseudo, template.get("Mappings", {}))
    return iam.policies_from_template(template, resolve, lambda logical: get_att(logical, "Arn"), account)


@dataclass
class Enforcement:
    """IAM on every call, AWS's API limits, and the engine patches, for one local stack."""

    policies: iam.Policies | None = None
    region: str = "us-east-1"
    lookup: MotoLookup | None = None
    patches: MotoPatches = field(default_factory=MotoPatches)
    _registered: list[tuple[Any, str]] = field(default_factory=list)
    _active: bool = False

    def install(self, template: dict[str, Any], stack_name: str, account: str, region: str) -> None:
        """Resolve the policies of the deployed stack and start checking (undone by :meth:`uninstall`)."""
        import boto3
        from botocore import handlers

        self.region = region
        self.policies = deployed_policies(template, stack_name, account, region)
        self.lookup = MotoLookup(account, region)
        self.patches.install()
        # The default session's clients from now on (the handlers' and moto engine's), and sessions
        # created later (BUILTIN_HANDLERS is copied into each new session).
        for event, handler in (("before-parameter-build", _keep_params), ("before-call", self._before_call)):
            handlers.BUILTIN_HANDLERS.append((event, handler))
            self._registered.append((handlers.BUILTIN_HANDLERS, event))
            if boto3.DEFAULT_SESSION is not None:
                boto3.DEFAULT_SESSION._session.register(event, handler, unique_id=f"longstep-fidelity-{event}")
                self._registered.append((boto3.DEFAULT_SESSION._session, event))
        self._active = True

    def allow_role(self, role_arn: str, statements: list[dict[str, Any]], state_machine: bool = False) -> None:
        """Check a role deployed beside the template (a bench's or a test's own) against its own policy.

        Without this, every call such a role makes is refused: the enforcement knows the
        template's roles only. ``statements`` are its identity policy's statements, resolved
        (ARNs, no intrinsics); ``state_machine``: the role of a state machine, whose Lambda
        invokes by moto's engine are checked against it.
        """
        if self.policies is None:
            return  # enforcement off: nothing is checked
        self.policies.roles[role_arn] = [dict(s) for s in statements]
        if state_machine and role_arn not in self.policies.engine_roles:
            self.policies.engine_roles.append(role_arn)

    def uninstall(self) -> None:
        from botocore import handlers

        self._active = False
        self.patches.uninstall()
        while self._registered:
            owner, event = self._registered.pop()
            if owner is handlers.BUILTIN_HANDLERS:
                owner[:] = [h for h in owner if not (h[0] == event and h[1] in (_keep_params, self._before_call))]
            else:
                owner.unregister(event, unique_id=f"longstep-fidelity-{event}")

    def _before_call(self, model: Any, request_signer: Any, context: dict[str, Any], **_: Any) -> None:
        if not self._active or context.get("longstep_checked"):
            return
        context["longstep_checked"] = True  # a client of a session that has the hook twice
        params = context.get("longstep_api_params", {})
        credentials = getattr(request_signer, "_credentials", None)
        engine = credentials is not None and getattr(credentials, "access_key", None) == ENGINE_ACCESS_KEY
        refused = self.refusal(model.service_model.signing_name, model.name, params, engine)
        if refused is not None:
            raise _client_error(model, *refused) from None

    def refusal(self, service: str, operation: str, params: dict[str, Any], engine: bool = False) -> tuple[str, int, str] | None:
        """Why AWS would refuse this call by the role bound now (``iam.acting_as``): (code, status, message), or None.

        The in-process hook asks it, and so does a Lambda worker process (``local/worker.py``)
        through the served endpoint, for the role of the function it runs.
        """
        if service == "states" and operation in _TOKEN_CALLS and self.lookup is not None and self.lookup.token_closed(params.get("taskToken", "")):
            # moto accepts an answer for a task that is over; AWS refuses it
            # (https://docs.aws.amazon.com/step-functions/latest/apireference/API_SendTaskSuccess.html).
            return "TaskTimedOut", 400, "Task Timed Out: the task of this token has already been closed"
        try:
            limits.check_call(service, operation, params)
            if self.policies is not None:
                iam.check_call(self.policies, self.lookup, self.region, service, operation, params, engine)
        except (limits.LimitError, iam.AccessDeniedError) as exc:
            return exc.code, exc.status, str(exc)
        return None


_TOKEN_CALLS = ("SendTaskSuccess", "SendTaskFailure", "SendTaskHeartbeat")


def _keep_params(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    """The API parameters, kept for ``before-call`` (which sees only the serialized request)."""
    context["longstep_api_params"] = params


def _client_error(model: Any, code: str, status: int, message: str) -> Exception:
    """The service's modelled exception class where it has one, so ``except client.exceptions.X`` works."""
    import boto3
    from botocore.exceptions import ClientError

    response = {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}}
    if boto3.DEFAULT_SESSION is not None:
        factory = boto3.DEFAULT_SESSION._session._get_internal_component("exceptions_factory")
        return factory.create_client_exceptions(model.service_model).from_code(code)(response, model.name)
    return ClientError(response, model.name)
