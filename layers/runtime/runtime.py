"""The dependencies one invocation works with: settings, stores, the step lock, clients, agents and
model providers. Every client comes from here, created on first use (``longstep.clients`` keeps
them across warm invocations), never at import time."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from longstep import clients
from longstep.agent import Agent
from longstep.artifacts import ArtifactStore
from longstep.events import Emitter
from longstep.humans.table import ApprovalTable
from longstep.memory import MemoryStore
from longstep.models.base import ModelProvider
from longstep.models.registry import build_provider
from longstep.models.scripted import ScriptedProvider
from longstep.models.settings import ModelSettings
from longstep.settings import Settings
from longstep.steps import RecordLease, StepLock
from longstep.store import CheckpointStore

AgentResolver = Callable[[str], Agent]

_script_cache: dict[str, ScriptedProvider] = {}
_script_lock = threading.Lock()


@dataclass
class Runtime:
    """Everything the tasks (``longstep.tasks``) need, injected.

    Attributes:
        settings: the function's settings.
        store: the checkpoint store.
        artifacts: the artifact store.
        lock: the step lock against concurrent duplicates.
        resolve_agent: finds an agent by name (raises UnknownAgentError).
        sfn: a Step Functions client, for handing a recorded decision to a fresh task token.
        sns: an SNS client, for telling approvers of a request.
        model_override: a provider to use instead of the one the run names (tests).
        events: what the invocation emits to its runs' event streams (``longstep.events``; by
            default it emits nothing: ``longstep.handler`` gives each invocation a real one).
    """

    settings: Settings
    store: CheckpointStore
    artifacts: ArtifactStore
    lock: StepLock
    resolve_agent: AgentResolver
    sfn: Any = None
    sns: Any = None
    model_override: ModelProvider | None = None
    events: Emitter = field(default_factory=lambda: Emitter(None))

    @classmethod
    def from_env(cls, resolve_agent: AgentResolver, lambda_context: Any = None) -> "Runtime":
        """Build a runtime from the environment, reusing the process's boto3 clients."""
        settings = Settings.from_env()
        dynamodb = clients.client("dynamodb")
        return cls(
            settings=settings,
            store=CheckpointStore(settings.checkpoint_table, dynamodb, settings.retention_days),
            artifacts=ArtifactStore(settings.artifact_bucket, clients.client("s3")),
            lock=RecordLease(lambda_context),
            resolve_agent=resolve_agent,
        )

    def step_functions(self) -> Any:
        """The Step Functions client (created on first use)."""
        if self.sfn is None:
            self.sfn = clients.client("stepfunctions")
        return self.sfn

    def notifications(self) -> Any:
        """The SNS client (created on first use)."""
        if self.sns is None:
            self.sns = clients.client("sns")
        return self.sns

    def approvals(self) -> ApprovalTable:
        """The approvals table the settings name, on the checkpoint store's DynamoDB client.

        Raises:
            SettingsError: the function's environment names no approvals table.
        """
        return ApprovalTable.from_settings(self.settings, self.store.client)

    def memory(self) -> MemoryStore | None:
        """The long-term memory table, or None when the deployment has none."""
        table = self.settings.memory_table
        return MemoryStore(table, self.store.client) if table else None

    def model_for(self, model: dict[str, Any], agent_model: ModelSettings | None = None) -> ModelProvider:
        """The provider for a run: its start input's ``model`` over the agent's settings."""
        if self.model_override is not None:
            return self.model_override
        if model.get("provider") == "scripted":
            uri = model["script_uri"]
            with _script_lock:
                provider = _script_cache.get(uri)
                if provider is None:
                    # ``s3://bucket/key#t0c1/...``: a subagent's script, inside its parent's (longstep.subagents)
                    base, _, path = uri.partition("#")
                    provider = ScriptedProvider.from_json(self.artifacts.get(base).decode("utf-8"))
                    _script_cache[uri] = provider = provider.child(path) if path else provider
            return provider
        return build_provider(model, agent_model, self.settings.model_id)
