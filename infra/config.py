"""The deployment configuration, read once from the CDK context and validated."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from longstep.fleet import FleetSettings
from longstep.references import REFERENCE
from longstep import settings as defaults
from longstep.subagents import DEFAULT_MAX_CHILDREN, DEFAULT_MAX_DEPTH
from longstep_kit.retry import RetryPolicies

CONTEXT_KEY = "longstep"
AGENT_NAME = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$"
EMAIL = r"^[^@\s]+@[^@\s]+\.[^@\s]+$"
# An IAM role or user (any path; an assumed role's session is checked as its role's ARN).
IAM_PRINCIPAL = r"^arn:aws[a-z-]*:iam::[0-9]{12}:(role|user)/[A-Za-z0-9+=,.@_/-]{1,512}$"
# The same shape the runtime accepts in LONGSTEP_AGENTS.
AGENT_REFERENCE = REFERENCE.pattern


def workflow_output_name(workflow: str) -> str:
    """The stack output holding workflow ``workflow``'s state machine ARN (letters and digits only)."""
    return "WorkflowStateMachineArn" + "".join(part[:1].upper() + part[1:] for part in re.split(r"[^A-Za-z0-9]+", workflow) if part)


class ConfigError(ValueError):
    """The deployment configuration is invalid; the message names each bad key."""


class DeploymentConfig(BaseModel):
    """What ``cdk.json`` (context key ``longstep``) may set; every field has a working default.

    Attributes:
        stack_name: the CloudFormation stack name.
        model_id: Bedrock model id for runs whose start input names none.
        bedrock_models: other Bedrock model or inference profile ids that start inputs and agents
            may name; ModelTurn is granted exactly these and ``model_id`` (a run naming another
            Bedrock model fails with AccessDenied and escalates).
        max_turns: default turn limit per run.
        offload_threshold_bytes: tool outputs above this go to S3.
        retention_days: checkpoint records expire this many days after a run's last renewal (TTL;
            renewed while the run lives, and counted from its end once it finished); at least
            twice the longest approval or escalation wait.
        approval_timeout_hours: how long an approval may wait before it times out.
        map_max_concurrency: parallel tool calls per turn.
        retry: transient-error budgets per step kind (``model``, ``tool``, ``bookkeeping``);
            a kind left out keeps its default.
        context_budget_tokens: the live context is summarized when it grows past this.
        snapshot_every: a snapshot of the live context is written every this many turns.
        keep_recent_turns: turns kept verbatim when older ones are summarized.
        turns_per_execution: turns before an execution hands the run to a fresh one (None:
            computed from the worst-case history events per turn, to stay under 25,000).
        lambda_memory_mb: memory of each function.
        model_timeout_seconds: timeout of the model-turn function.
        tool_timeout_seconds: timeout of the tool-call function.
        log_retention_days: CloudWatch log retention.
        destroy_on_delete: delete tables and bucket with the stack (for sandboxes only).
        customer_managed_key: encrypt the tables, the bucket and the log groups with one
            customer-managed KMS key (rotated yearly) instead of AWS-managed keys.
        agents: the agents this deployment serves: name (what start inputs put in ``agent``) ->
            ``"module:callable"`` in the project (the callable returns a ``longstep.agent.Agent``).
        workflows: the code-defined workflows this deployment serves: name (what start inputs
            put in ``workflow``) -> ``"module:callable"`` (returns a ``longstep.workflows.Workflow``);
            none: no workflow state machine is deployed.
        model_providers: model providers beyond the built-in ``bedrock`` (``LONGSTEP_MODEL_PROVIDERS``,
            see ``longstep.models.registry``): name -> ``{"secret_id", "base_url", "factory",
            "options", "timeout_seconds"}``. Set on the ModelTurn function only, which alone is
            granted ``secretsmanager:GetSecretValue`` on each ``secret_id``.
        alarm_emails: addresses subscribed (by email, once each confirms) to the topic every
            alarm notifies.
        api_gateway_cloudwatch_role: create API Gateway's account-wide CloudWatch Logs role (it
            replaces any role the account already set for the Region); off by default: set it, or
            set the role once per account and Region yourself, for the approval API's stage logs.
        api_gateway_stage_logs: the approval API's stage writes execution and access logs. API
            Gateway refuses a stage with logs while the account has no CloudWatch Logs role for the
            Region, so they are off by default (a first deploy works on a fresh account); set this
            once the account has the role, or set ``api_gateway_cloudwatch_role`` (implies it).
        approval_email: an address subscribed (by email, once it confirms) to the topic that
            announces each approval request; None subscribes nobody.
        approval_webhook_url: a chat webhook (Slack, Teams: ``{"text": ...}``) told of each approval
            request and escalation, with its page's link; None: no webhook.
        subagent_max_depth: how deep a tree of subagent runs may grow (a top-level run is depth 0).
        subagent_max_children: child runs one run may start over its life.
        subagent_timeout_hours: how long a delegated call waits for its child run.
        link_key_rotation_days: how often the key signing approval links rotates (a link stays
            valid across one rotation; the stack rotates no faster than the approval timeout).
        signal_principals: the IAM roles and users (ARNs) that may put signal events (source
            ``longstep.signal``) on the stack's signal bus; the bus's policy refuses everyone else,
            and with none named nobody can signal through EventBridge (the approval API still can).
        compatible_code_versions: run code versions (``longstep show``: 16 hex digits) this
            deploy's code accepts: a run recorded on one of them moves to this deploy's code at its
            next continue-as-new; any other run finishes on the version it started on.
        fleet: concurrency keys (``concurrency``: ``key``, ``limit``) and shared model rate limits
            (``rate_limits``: model id -> ``requests_per_minute``, ``tokens_per_minute``...);
            ``longstep.fleet.FleetSettings``, docs/fleet.md. None: off.
    """

    model_config = ConfigDict(extra="forbid", strict=True)

    stack_name: str = Field(default="Longstep", pattern=r"^[A-Za-z][A-Za-z0-9-]{0,127}$")
    model_id: str = Field(default=defaults.DEFAULT_MODEL_ID, min_length=1)
    bedrock_models: list[Annotated[str, Field(min_length=1, max_length=256)]] = Field(default_factory=list, max_length=20)
    max_turns: int = Field(default=defaults.DEFAULT_MAX_TURNS, ge=1, le=10_000)
    offload_threshold_bytes: int = Field(default=defaults.DEFAULT_OFFLOAD_THRESHOLD_BYTES, ge=1024, le=200 * 1024)
    retention_days: int = Field(default=defaults.DEFAULT_RETENTION_DAYS, ge=1, le=3650)
    approval_timeout_hours: int = Field(default=defaults.DEFAULT_APPROVAL_TIMEOUT_SECONDS // 3600, ge=1, le=365 * 24)
    map_max_concurrency: int = Field(default=10, ge=1, le=40)
    retry: RetryPolicies = Field(default_factory=RetryPolicies)
    context_budget_tokens: int = Field(default=defaults.DEFAULT_CONTEXT_BUDGET_TOKENS, ge=1_000, le=1_000_000)
    snapshot_every: int = Field(default=defaults.DEFAULT_SNAPSHOT_EVERY, ge=1, le=1_000)
    keep_recent_turns: int = Field(default=defaults.DEFAULT_KEEP_RECENT_TURNS, ge=1, le=100)
    turns_per_execution: int | None = Field(default=None, ge=1, le=10_000)
    lambda_memory_mb: int = Field(default=512, ge=128, le=10_240)
    model_timeout_seconds: int = Field(default=300, ge=10, le=900)
    tool_timeout_seconds: int = Field(default=120, ge=3, le=900)
    log_retention_days: Literal[1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1827, 3653] = 30
    destroy_on_delete: bool = False
    customer_managed_key: bool = False
    alarm_emails: list[Annotated[str, Field(pattern=EMAIL, max_length=254)]] = Field(default_factory=list, max_length=10)
    api_gateway_cloudwatch_role: bool = False
    api_gateway_stage_logs: bool = False
    approval_email: str | None = Field(default=None, pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$", max_length=254)
    approval_webhook_url: str | None = Field(default=None, pattern=r"^https://[^\s]+$", max_length=2048)
    link_key_rotation_days: int = Field(default=30, ge=1, le=365)
    model_providers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    subagent_max_depth: int = Field(default=DEFAULT_MAX_DEPTH, ge=0, le=10)
    subagent_max_children: int = Field(default=DEFAULT_MAX_CHILDREN, ge=0, le=1_000)
    subagent_timeout_hours: int = Field(default=defaults.DEFAULT_SUBAGENT_TIMEOUT_SECONDS // 3600, ge=1, le=365 * 24)
    agents: dict[Annotated[str, Field(pattern=AGENT_NAME)], Annotated[str, Field(pattern=AGENT_REFERENCE)]] = Field(default_factory=dict)
    workflows: dict[Annotated[str, Field(pattern=AGENT_NAME)], Annotated[str, Field(pattern=AGENT_REFERENCE)]] = Field(default_factory=dict)
    signal_principals: list[Annotated[str, Field(pattern=IAM_PRINCIPAL)]] = Field(default_factory=list, max_length=50)
    # At most 100: the list is the state machine version's description (2048 characters).
    compatible_code_versions: list[Annotated[str, Field(pattern=r"^[0-9a-f]{16}$")]] = Field(default_factory=list, max_length=100)
    fleet: FleetSettings | None = None


def load_config(context: Any) -> DeploymentConfig:
    """Validate the ``longstep`` context value.

    Raises:
        ConfigError: naming each bad key as ``longstep.<key>``.
    """
    if context is None:
        context = {}
    if not isinstance(context, dict):
        raise ConfigError(f"{CONTEXT_KEY}: must be an object, got {type(context).__name__}")
    try:
        config = DeploymentConfig.model_validate(context)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            path = ".".join(str(p) for p in err["loc"])
            problems.append(f"{CONTEXT_KEY}.{path}: {err['msg']}")
        raise ConfigError("invalid deployment configuration: " + "; ".join(problems)) from None
    _check_providers(config)
    _check_retention(config)
    return config


# Escalations wait this long for a human (DurableAgentProps.escalation_timeout's default).
ESCALATION_TIMEOUT_HOURS = defaults.DEFAULT_ESCALATION_TIMEOUT_SECONDS // 3600


def retention_waits(config: DeploymentConfig) -> dict[str, tuple[int, bool]]:
    """Every wait the configuration allows: name -> (longest hours, whether its records are kept
    past it by a renewal before it starts).

    ModelTurn renews a run's records (``longstep.tasks.common.keep_records``), those its calls
    will write included, to the longest wait its turn may start: ``wait_for`` (up to a year),
    approvals, subagents (``subagent_timeout_hours``) and two escalations after. What is not
    renewed is the approval request in the approvals table (kept ``retention_days`` from its
    request) and a run's records between turns (renewed at half the retention): an approval or an
    escalation must fit in half the retention.
    """
    from longstep.tools.builtins import MAX_WAIT_SECONDS

    return {
        "approval_timeout_hours": (config.approval_timeout_hours, False),
        "escalations": (ESCALATION_TIMEOUT_HOURS, False),
        "subagent_timeout_hours": (config.subagent_timeout_hours, True),
        "wait_for": (MAX_WAIT_SECONDS // 3600, True),
    }


def _check_retention(config: DeploymentConfig) -> None:
    """Records outlive every wait the configuration allows: the renewed ones by their renewal, the
    others (approvals, escalations) because they fit in half the retention (``retention_waits``)."""
    unrenewed = {name: hours for name, (hours, renewed) in retention_waits(config).items() if not renewed}
    longest_name, longest_hours = max(unrenewed.items(), key=lambda item: item[1])
    needed_days = -(-2 * longest_hours // 24)  # ceil
    if config.retention_days < needed_days:
        waits = ", ".join(f"{name} {hours} h" for name, hours in unrenewed.items())
        raise ConfigError(
            f"{CONTEXT_KEY}.retention_days: {config.retention_days} days is too short for {longest_name} ({longest_hours} h; "
            f"waits not renewed: {waits}); records are renewed at half their retention, so use at least {needed_days}"
        )


def _check_providers(config: DeploymentConfig) -> None:
    """The providers parse as the runtime will parse them (one line naming the field)."""
    from longstep.errors import UnknownProviderError
    from longstep.models.registry import ENV_MODEL_PROVIDERS, parse_providers

    try:
        parse_providers(providers_variable(config.model_providers))
    except UnknownProviderError as exc:
        raise ConfigError(str(exc).replace(ENV_MODEL_PROVIDERS, f"{CONTEXT_KEY}.model_providers", 1)) from None


def providers_variable(providers: dict[str, dict[str, Any]]) -> str:
    """The value of ``LONGSTEP_MODEL_PROVIDERS`` for the configured providers ("" for none)."""
    import json

    return json.dumps(providers, sort_keys=True, separators=(",", ":")) if providers else ""
