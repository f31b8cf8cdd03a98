"""What a durable agent needs (``DurableAgent``'s props), apart from the construct so that the
modules that build its parts (``loop_grants``) read it without importing the construct."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns

from longstep import settings as env
from longstep.fleet import FleetSettings
from longstep.subagents import DEFAULT_MAX_CHILDREN, DEFAULT_MAX_DEPTH
from longstep_kit.constructs.agent_resources import AgentResources
from longstep_kit.retry import RetryPolicies


@dataclass(frozen=True)
class DurableAgentProps:
    """What a durable agent needs.

    Attributes:
        layer: the runtime layer.
        checkpoints: the checkpoint table.
        idempotency: the idempotency (lock) table.
        artifacts: the artifacts bucket.
        approvals: the approvals table (longstep/keys.py ``approvals_table``).
        approval_topic: the topic told of each approval request (None: nobody is told).
        agent_resources: agent name -> its declared resources, bound to its CallTool and
            CheckCondition functions only (an agent missing here gets functions with no world grants).
        agent_conditions: agent name -> the conditions it declares; an agent declaring none gets a
            CheckCondition function with no grants (it answers "unknown condition" reading
            nothing). None: not known, every CheckCondition function gets its grants.
        agent_inline_tools: agent name -> the read tools it runs inside ModelTurn
            (``Agent.inline_read_tools``); such an agent gets a ModelTurn function of its own.
        model_id: default Bedrock model id.
        bedrock_models: other Bedrock model or inference profile ids runs and agents may name
            (ModelTurn may invoke exactly these and ``model_id``).
        model_providers: ``LONGSTEP_MODEL_PROVIDERS`` (provider name -> settings), set on
            ModelTurn, whose role alone may read each provider's ``secret_id``.
        max_turns: default turn limit.
        offload_threshold_bytes: tool outputs above this go to S3.
        retention_days: TTL of checkpoint records.
        approval_timeout: how long an approval may wait.
        escalation_timeout: how long an escalated step may wait for a human.
        map_max_concurrency: parallel tool calls per turn.
        retry: transient-error retry budgets per step kind.
        context_budget_tokens: the live context is summarized past this many tokens.
        snapshot_every: a live-context snapshot every this many turns.
        keep_recent_turns: turns kept verbatim when older ones are summarized.
        turns_per_execution: turns before continue-as-new.
        memory_mb: Lambda memory.
        model_timeout: ModelTurn function timeout.
        tool_timeout: CallTool function timeout.
        log_retention: log group retention.
        encryption_key: a customer-managed key the tables and bucket use; the log groups use it too.
        function_code_dir: the directory of the functions' code: the entry points and the agents (``longstep_kit.bundling.build_function_code``).
        agents: agent name -> ``module:callable`` (``LONGSTEP_AGENTS``).
        subagent_max_depth: how deep a tree of subagent runs may grow (``longstep.subagents``).
        subagent_max_children: child runs one run may start.
        subagent_timeout: how long a delegated call waits for its child run.
        compatible_code_versions: the run code versions this deploy's state machine version
            accepts at a continue-as-new boundary (``longstep.pinning``).
        fleet: concurrency keys and model rate limits (``constructs.loop_fleet``; None: off).
    """

    layer: lambda_.ILayerVersion
    checkpoints: dynamodb.ITable
    idempotency: dynamodb.ITable
    artifacts: s3.IBucket
    approvals: dynamodb.ITable
    memory: dynamodb.ITable | None = None
    approval_topic: sns.ITopic | None = None
    agent_resources: dict[str, AgentResources] = field(default_factory=dict)
    agent_conditions: dict[str, tuple[str, ...]] | None = None
    agent_inline_tools: dict[str, tuple[str, ...]] = field(default_factory=dict)
    model_id: str = env.DEFAULT_MODEL_ID
    bedrock_models: tuple[str, ...] = ()
    model_providers: dict[str, dict] = field(default_factory=dict)
    max_turns: int = env.DEFAULT_MAX_TURNS
    offload_threshold_bytes: int = env.DEFAULT_OFFLOAD_THRESHOLD_BYTES
    retention_days: int = env.DEFAULT_RETENTION_DAYS
    approval_timeout: Duration = Duration.days(7)
    escalation_timeout: Duration = Duration.days(7)
    map_max_concurrency: int = 10
    retry: RetryPolicies = field(default_factory=RetryPolicies)
    context_budget_tokens: int = env.DEFAULT_CONTEXT_BUDGET_TOKENS
    snapshot_every: int = env.DEFAULT_SNAPSHOT_EVERY
    keep_recent_turns: int = env.DEFAULT_KEEP_RECENT_TURNS
    turns_per_execution: int = env.DEFAULT_TURNS_PER_EXECUTION
    memory_mb: int = 512
    model_timeout: Duration = Duration.minutes(5)
    tool_timeout: Duration = Duration.minutes(2)
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH
    encryption_key: kms.IKey | None = None
    function_code_dir: Path | None = None
    agents: dict[str, str] = field(default_factory=dict)
    subagent_max_depth: int = DEFAULT_MAX_DEPTH
    subagent_max_children: int = DEFAULT_MAX_CHILDREN
    subagent_timeout: Duration = Duration.days(7)
    compatible_code_versions: tuple[str, ...] = ()
    fleet: FleetSettings | None = None
