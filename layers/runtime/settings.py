"""Environment variable names shared by the CDK stack and the runtime, and the settings read from them.

The stack writes these variables into each function's environment and the runtime reads them
back, so every name lives here once (the modules that read one import it from here) and
``longstep_kit`` imports them; so do the defaults the deployment configuration derives from.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from longstep import environment

ENV_CHECKPOINT_TABLE = "LONGSTEP_CHECKPOINT_TABLE"
ENV_IDEMPOTENCY_TABLE = "LONGSTEP_IDEMPOTENCY_TABLE"
ENV_ARTIFACT_BUCKET = "LONGSTEP_ARTIFACT_BUCKET"
# The agents a deployment serves: a JSON object of agent name -> "module:callable" (see
# longstep.agents). The callable takes no argument and returns a longstep.agent.Agent.
ENV_AGENTS = "LONGSTEP_AGENTS"
ENV_MODEL_ID = "LONGSTEP_MODEL_ID"
ENV_OFFLOAD_THRESHOLD_BYTES = "LONGSTEP_OFFLOAD_THRESHOLD_BYTES"
ENV_MAX_TURNS = "LONGSTEP_MAX_TURNS"
ENV_RETENTION_DAYS = "LONGSTEP_RETENTION_DAYS"
# Approvals (longstep.humans): the approvals table, the topic notified of each request, how
# long a request waits (the RequestApproval task's timeout), and the approval API's base URL.
ENV_APPROVALS_TABLE = "LONGSTEP_APPROVALS_TABLE"
ENV_APPROVAL_TOPIC_ARN = "LONGSTEP_APPROVAL_TOPIC_ARN"
ENV_APPROVAL_TIMEOUT_SECONDS = "LONGSTEP_APPROVAL_TIMEOUT_SECONDS"
ENV_APPROVAL_API_URL = "LONGSTEP_APPROVAL_API_URL"
# The longest waits of the loop's humans and children (JSON: {"approval", "escalation",
# "subagent"} in seconds): a turn's records are kept past the waits it may start (WaitTimeouts).
ENV_WAIT_TIMEOUTS = "LONGSTEP_WAIT_TIMEOUTS"
ENV_CONTEXT_BUDGET_TOKENS = "LONGSTEP_CONTEXT_BUDGET_TOKENS"
ENV_SNAPSHOT_EVERY = "LONGSTEP_SNAPSHOT_EVERY"
ENV_KEEP_RECENT_TURNS = "LONGSTEP_KEEP_RECENT_TURNS"
ENV_TURNS_PER_EXECUTION = "LONGSTEP_TURNS_PER_EXECUTION"
ENV_MEMORY_TABLE = "LONGSTEP_MEMORY_TABLE"
# Concurrency keys and shared model rate limits (JSON of longstep.fleet.FleetSettings; unset: off).
ENV_FLEET = "LONGSTEP_FLEET"

# The function's agent: every function that runs one agent's tool code carries it, and one
# variable per resource it declares (longstep.resources: the prefix and the resource's name).
ENV_AGENT = "LONGSTEP_AGENT"
TABLE_VARIABLE_PREFIX = "LONGSTEP_TABLE_"
SECRET_VARIABLE_PREFIX = "LONGSTEP_SECRET_"
# Model providers beyond Bedrock (longstep.models.registry: provider -> settings, JSON), ModelTurn only.
ENV_MODEL_PROVIDERS = "LONGSTEP_MODEL_PROVIDERS"
# The chat webhook told of each approval request and escalation (longstep.humans.notifications).
ENV_APPROVAL_WEBHOOK_URL = "LONGSTEP_APPROVAL_WEBHOOK_URL"
# The secret that holds the key signing approval page links (its ARN; longstep.links).
ENV_LINK_KEY_SECRET = "LONGSTEP_LINK_KEY_SECRET"
# How deep a tree of subagent runs may grow, and how many children one run may start (longstep.subagents).
ENV_SUBAGENT_MAX_DEPTH = "LONGSTEP_SUBAGENT_MAX_DEPTH"
ENV_SUBAGENT_MAX_CHILDREN = "LONGSTEP_SUBAGENT_MAX_CHILDREN"
# Workflows (longstep.workflows): the ones a deployment serves (name -> "module:callable", JSON), the
# agent state machine their children run on, and the passes (invocations that advance a workflow)
# before an execution hands the run to a new one.
ENV_WORKFLOWS = "LONGSTEP_WORKFLOWS"
ENV_AGENT_STATE_MACHINE = "LONGSTEP_AGENT_STATE_MACHINE_ARN"
ENV_PASSES_PER_EXECUTION = "LONGSTEP_WORKFLOW_PASSES_PER_EXECUTION"
# CheckCondition's budget of checks per execution before it hands the wait to a new one
# (longstep.tasks.check_condition); the tools a ModelTurn may run inline, and the seconds of the
# invocation it keeps in reserve (longstep.tasks.inline_tools).
ENV_CONDITION_CHECKS = "LONGSTEP_CONDITION_CHECKS_PER_EXECUTION"
ENV_INLINE_TOOLS = "LONGSTEP_INLINE_TOOLS"
ENV_INLINE_RESERVE_SECONDS = "LONGSTEP_INLINE_RESERVE_SECONDS"

# Observability (longstep.observability). The Powertools names are Powertools' own; the stack sets
# them so that logs and metrics land under one service and namespace.
ENV_SERVICE_NAME = "POWERTOOLS_SERVICE_NAME"
ENV_METRICS_NAMESPACE = "POWERTOOLS_METRICS_NAMESPACE"
# Set by the Lambda runtime in every function: its presence means "running in Lambda".
ENV_LAMBDA_FUNCTION_NAME = "AWS_LAMBDA_FUNCTION_NAME"
SERVICE_NAME = "longstep"
METRICS_NAMESPACE = "Longstep"

# Claude Sonnet 4.6 through the US cross-Region inference profile (on-demand Claude 4.x models are
# served through profiles only). Launched on Bedrock February 2026, so under the legacy lifecycle
# policy it stays at least 12 months before end of life:
# https://docs.aws.amazon.com/bedrock/latest/userguide/model-lifecycle-legacy.html; model ids:
# https://platform.claude.com/docs/en/build-with-claude/claude-on-amazon-bedrock-legacy (Converse,
# ARN-versioned ids; newer Claude models without such an id are not served by Converse).
# IAM: longstep_kit.bedrock_access.invoke_model_grants.
DEFAULT_MODEL_ID = "us.anthropic.claude-sonnet-4-6"
# Tool outputs above this size go to S3; 16 KB keeps a turn's records far under DynamoDB's 400 KB.
DEFAULT_OFFLOAD_THRESHOLD_BYTES = 16 * 1024
DEFAULT_MAX_TURNS = 40
DEFAULT_RETENTION_DAYS = 90
# The live context is summarized past this many tokens (estimated as bytes / 4).
DEFAULT_CONTEXT_BUDGET_TOKENS = 50_000
DEFAULT_SNAPSHOT_EVERY = 50
# Turns kept verbatim when older ones are summarized (at least the correction budgets).
DEFAULT_KEEP_RECENT_TURNS = 6
# Standard executions keep at most 25,000 history events; see longstep_kit.constructs.history_budget.
DEFAULT_TURNS_PER_EXECUTION = 100


@dataclass(frozen=True)
class Tunable:
    """A number the deployment sets for every function of the loop, declared once.

    The kit's configuration key, the ``DurableAgentProps`` field and the :class:`Settings` field
    share ``name``; the stack writes ``variable`` from the props and :meth:`Settings.from_env`
    reads it back, ``default`` when unset.
    """

    name: str
    variable: str
    default: int


TUNABLES = (
    Tunable("max_turns", ENV_MAX_TURNS, DEFAULT_MAX_TURNS),
    Tunable("offload_threshold_bytes", ENV_OFFLOAD_THRESHOLD_BYTES, DEFAULT_OFFLOAD_THRESHOLD_BYTES),
    Tunable("retention_days", ENV_RETENTION_DAYS, DEFAULT_RETENTION_DAYS),
    Tunable("context_budget_tokens", ENV_CONTEXT_BUDGET_TOKENS, DEFAULT_CONTEXT_BUDGET_TOKENS),
    Tunable("snapshot_every", ENV_SNAPSHOT_EVERY, DEFAULT_SNAPSHOT_EVERY),
    Tunable("keep_recent_turns", ENV_KEEP_RECENT_TURNS, DEFAULT_KEEP_RECENT_TURNS),
    Tunable("turns_per_execution", ENV_TURNS_PER_EXECUTION, DEFAULT_TURNS_PER_EXECUTION),
)

# How long an approval request waits (the RequestApproval task's timeout) when the stack sets none.
DEFAULT_APPROVAL_TIMEOUT_SECONDS = 7 * 86_400
# What the state machine's tasks need; the approval API and the signal target need less.
LOOP_VARIABLES = (ENV_CHECKPOINT_TABLE, ENV_IDEMPOTENCY_TABLE, ENV_ARTIFACT_BUCKET)


class SettingsError(ValueError):
    """A required environment variable is missing or malformed."""


# An escalation or a delegated call waits this long when the stack sets none (DurableAgentProps).
DEFAULT_ESCALATION_TIMEOUT_SECONDS = 7 * 86_400
DEFAULT_SUBAGENT_TIMEOUT_SECONDS = 7 * 86_400


@dataclass(frozen=True)
class WaitTimeouts:
    """How long the state machine's task-token waits may last (their tasks' ``TimeoutSeconds``).

    Attributes:
        approval: RequestApproval.
        escalation: every Escalate task.
        subagent: DelegateToSubagent (a child run).
    """

    approval: int = DEFAULT_APPROVAL_TIMEOUT_SECONDS
    escalation: int = DEFAULT_ESCALATION_TIMEOUT_SECONDS
    subagent: int = DEFAULT_SUBAGENT_TIMEOUT_SECONDS

    def variable(self) -> str:
        """The value of ``LONGSTEP_WAIT_TIMEOUTS`` for these timeouts."""
        return json.dumps({"approval": self.approval, "escalation": self.escalation, "subagent": self.subagent}, sort_keys=True)

    @classmethod
    def parse(cls, raw: str | None) -> "WaitTimeouts":
        """Read ``LONGSTEP_WAIT_TIMEOUTS`` (unset: the defaults).

        Raises:
            SettingsError: it is not an object of positive integers named as the attributes.
        """
        if not raw or not raw.strip():
            return cls()
        try:
            values = json.loads(raw)
        except ValueError:
            values = None
        names = {"approval", "escalation", "subagent"}
        if (
            not isinstance(values, dict)
            or not set(values) <= names
            or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values.values())
        ):
            raise SettingsError(f"environment variable {ENV_WAIT_TIMEOUTS} must be a JSON object of positive seconds ({', '.join(sorted(names))})")
        return cls(**values)


def _text(environ: Mapping[str, str], name: str, required: bool) -> str | None:
    value = environ.get(name, "").strip()
    if not value and required:
        raise SettingsError(f"environment variable {name} is not set")
    return value or None


def _int(environ: Mapping[str, str], name: str, default: int) -> int:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise SettingsError(f"environment variable {name} must be an integer, got {raw!r}") from exc
    if value <= 0:
        raise SettingsError(f"environment variable {name} must be positive, got {value}")
    return value


@dataclass(frozen=True)
class ApprovalSettings:
    """Where approval requests live and how long they wait.

    Attributes:
        table: the approvals table (None when the function has none: see ``table_name``).
        topic_arn: the SNS topic told of each request (None: nobody is notified).
        timeout_seconds: how long a request waits (the RequestApproval task's timeout).
        api_url: the approval API's base URL, for the notification (None when unknown).
    """

    table: str | None = None
    topic_arn: str | None = None
    timeout_seconds: int = DEFAULT_APPROVAL_TIMEOUT_SECONDS
    api_url: str | None = None

    def table_name(self) -> str:
        """The approvals table.

        Raises:
            SettingsError: the function's environment names no approvals table.
        """
        if not self.table:
            raise SettingsError(f"environment variable {ENV_APPROVALS_TABLE} is not set")
        return self.table


@dataclass(frozen=True)
class Settings:
    """Every setting of one Lambda function, built once per invocation.

    Attributes:
        checkpoint_table: DynamoDB table holding runs and their recorded steps.
        idempotency_table: DynamoDB table used by Powertools idempotency as the execution lock.
        artifact_bucket: S3 bucket for offloaded outputs.
        model_id: Bedrock model id for runs whose start input names none.
        offload_threshold_bytes: tool outputs larger than this are stored in S3.
        max_turns: default turn limit when the start input names none.
        retention_days: how long step records (and approval requests) live before DynamoDB TTL
            removes them.
        context_budget_tokens: the live context is summarized when it grows past this.
        snapshot_every: a snapshot of the live context is written every this many turns.
        keep_recent_turns: turns kept verbatim when older ones are summarized.
        turns_per_execution: an execution hands the run to a fresh one after this many turns.
        memory_table: the long-term memory table (None: memory tools answer "not configured").
        approvals: where approval requests live and how long they wait.
        wait_timeouts: how long approvals, escalations and delegated calls may wait.
    """

    checkpoint_table: str
    idempotency_table: str
    artifact_bucket: str
    model_id: str = DEFAULT_MODEL_ID
    offload_threshold_bytes: int = DEFAULT_OFFLOAD_THRESHOLD_BYTES
    max_turns: int = DEFAULT_MAX_TURNS
    retention_days: int = DEFAULT_RETENTION_DAYS
    context_budget_tokens: int = DEFAULT_CONTEXT_BUDGET_TOKENS
    snapshot_every: int = DEFAULT_SNAPSHOT_EVERY
    keep_recent_turns: int = DEFAULT_KEEP_RECENT_TURNS
    turns_per_execution: int = DEFAULT_TURNS_PER_EXECUTION
    memory_table: str | None = None
    approvals: ApprovalSettings = field(default_factory=ApprovalSettings)
    wait_timeouts: WaitTimeouts = field(default_factory=WaitTimeouts)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, required: Iterable[str] = LOOP_VARIABLES, **explicit: Any) -> "Settings":
        """The settings: each value given explicitly, else read from the environment, else its default.

        Args:
            environ: the environment (the function's by default: ``longstep.environment``).
            required: variables that must be set unless their value is given explicitly (a
                table or bucket not required and not set reads as ``""``: the function does
                not use it).
            explicit: field values that win over the environment (``approvals`` included).

        Raises:
            SettingsError: a required variable is missing or a number is malformed.
        """
        env = environment.environ() if environ is None else environ
        need = set(required)

        def text(name: str) -> str:
            return _text(env, name, name in need) or ""

        read: dict[str, Any] = {
            "checkpoint_table": lambda: text(ENV_CHECKPOINT_TABLE),
            "idempotency_table": lambda: text(ENV_IDEMPOTENCY_TABLE),
            "artifact_bucket": lambda: text(ENV_ARTIFACT_BUCKET),
            "model_id": lambda: _text(env, ENV_MODEL_ID, False) or DEFAULT_MODEL_ID,
            **{tunable.name: (lambda tunable=tunable: _int(env, tunable.variable, tunable.default)) for tunable in TUNABLES},
            "memory_table": lambda: _text(env, ENV_MEMORY_TABLE, False),
            "approvals": lambda: ApprovalSettings(
                table=_text(env, ENV_APPROVALS_TABLE, ENV_APPROVALS_TABLE in need),
                topic_arn=_text(env, ENV_APPROVAL_TOPIC_ARN, False),
                timeout_seconds=_int(env, ENV_APPROVAL_TIMEOUT_SECONDS, DEFAULT_APPROVAL_TIMEOUT_SECONDS),
                api_url=_text(env, ENV_APPROVAL_API_URL, False),
            ),
            "wait_timeouts": lambda: WaitTimeouts.parse(env.get(ENV_WAIT_TIMEOUTS)),
        }
        unknown = set(explicit) - set(read)
        if unknown:
            raise TypeError(f"Settings has no field {', '.join(sorted(unknown))}")
        return cls(**{name: explicit[name] if name in explicit else reader() for name, reader in read.items()})
