"""Environment variable names shared by the CDK stack and the runtime, and the settings read from them.

The stack writes these variables into each function's environment and the runtime reads them
back, so the names live here once and ``infra`` imports them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

ENV_CHECKPOINT_TABLE = "LONGSTEP_CHECKPOINT_TABLE"
ENV_IDEMPOTENCY_TABLE = "LONGSTEP_IDEMPOTENCY_TABLE"
ENV_ARTIFACT_BUCKET = "LONGSTEP_ARTIFACT_BUCKET"
ENV_TICKETS_TABLE = "LONGSTEP_TICKETS_TABLE"
ENV_OUTBOX_TABLE = "LONGSTEP_OUTBOX_TABLE"
ENV_DOCUMENTS_TABLE = "LONGSTEP_DOCUMENTS_TABLE"
ENV_MODEL_ID = "LONGSTEP_MODEL_ID"
ENV_OFFLOAD_THRESHOLD_BYTES = "LONGSTEP_OFFLOAD_THRESHOLD_BYTES"
ENV_MAX_TURNS = "LONGSTEP_MAX_TURNS"
ENV_RETENTION_DAYS = "LONGSTEP_RETENTION_DAYS"

# Observability (longstep.observability). The Powertools names are Powertools' own; the stack sets
# them so that logs and metrics land under one service and namespace.
ENV_SERVICE_NAME = "POWERTOOLS_SERVICE_NAME"
ENV_METRICS_NAMESPACE = "POWERTOOLS_METRICS_NAMESPACE"
# Set by the Lambda runtime in every function: its presence means "running in Lambda".
ENV_LAMBDA_FUNCTION_NAME = "AWS_LAMBDA_FUNCTION_NAME"
SERVICE_NAME = "longstep"
METRICS_NAMESPACE = "Longstep"

DEFAULT_MODEL_ID = "anthropic.claude-3-5-sonnet-20240620-v1:0"
# Tool outputs above this size go to S3; 16 KB keeps a turn's records far under DynamoDB's 400 KB.
DEFAULT_OFFLOAD_THRESHOLD_BYTES = 16 * 1024
DEFAULT_MAX_TURNS = 40
DEFAULT_RETENTION_DAYS = 90


class SettingsError(ValueError):
    """A required environment variable is missing or malformed."""


def _required(environ: dict[str, str], name: str) -> str:
    value = environ.get(name, "").strip()
    if not value:
        raise SettingsError(f"environment variable {name} is not set")
    return value


def _int(environ: dict[str, str], name: str, default: int) -> int:
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
class Settings:
    """Runtime settings for one Lambda function.

    Attributes:
        checkpoint_table: DynamoDB table holding runs and their recorded steps.
        idempotency_table: DynamoDB table used by Powertools idempotency as the execution lock.
        artifact_bucket: S3 bucket for offloaded outputs.
        model_id: Bedrock model id for runs whose start input names none.
        offload_threshold_bytes: tool outputs larger than this are stored in S3.
        max_turns: default turn limit when the start input names none.
        retention_days: how long step records live before DynamoDB TTL removes them.
    """

    checkpoint_table: str
    idempotency_table: str
    artifact_bucket: str
    model_id: str = DEFAULT_MODEL_ID
    offload_threshold_bytes: int = DEFAULT_OFFLOAD_THRESHOLD_BYTES
    max_turns: int = DEFAULT_MAX_TURNS
    retention_days: int = DEFAULT_RETENTION_DAYS

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> "Settings":
        """Read settings from the environment (``os.environ`` by default).

        Raises:
            SettingsError: a required variable is missing or a number is malformed.
        """
        env = dict(os.environ if environ is None else environ)
        return cls(
            checkpoint_table=_required(env, ENV_CHECKPOINT_TABLE),
            idempotency_table=_required(env, ENV_IDEMPOTENCY_TABLE),
            artifact_bucket=_required(env, ENV_ARTIFACT_BUCKET),
            model_id=env.get(ENV_MODEL_ID, "").strip() or DEFAULT_MODEL_ID,
            offload_threshold_bytes=_int(env, ENV_OFFLOAD_THRESHOLD_BYTES, DEFAULT_OFFLOAD_THRESHOLD_BYTES),
            max_turns=_int(env, ENV_MAX_TURNS, DEFAULT_MAX_TURNS),
            retention_days=_int(env, ENV_RETENTION_DAYS, DEFAULT_RETENTION_DAYS),
        )
