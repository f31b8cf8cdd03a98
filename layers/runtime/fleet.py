"""Fleet settings: concurrency keys and shared model rate limits (both off unless configured).

The kit validates them in the deployment configuration (``longstep_kit.config``: ``fleet``) and
writes them, as this model's JSON, into ``LONGSTEP_FLEET`` of the function that applies them; the
runtime reads them back with ``FleetSettings.from_env``. One model, so the two cannot drift.
"""

from __future__ import annotations

from typing import Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from longstep import environment
from longstep.settings import ENV_FLEET, SettingsError


class ConcurrencySettings(BaseModel):
    """At most ``limit`` running runs per value of the run attribute ``key`` (``longstep.concurrency``).

    Attributes:
        key: the run attribute the runs are counted by (``tenant``, ``agent``).
        limit: running runs per key until a limit is set live (``longstep fleet limit``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: Literal["tenant", "agent"] = "tenant"
    limit: int = Field(default=10, ge=1, le=10_000)


class RateSettings(BaseModel):
    """A model's shared quota, per account and Region as Bedrock's are (``longstep.rate_limit``).

    Attributes:
        requests_per_minute: model calls per minute every run together may make.
        tokens_per_minute: input plus output tokens per minute (Bedrock counts them together).
        tokens_per_call: what one call is counted for before it is made (its usage is not known
            yet): about the largest context plus ``max_tokens`` of a turn.
        burst_seconds: how many seconds of the quota may go at once; the refill is the rest, so
            no 60-second window holds more than the quota.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    requests_per_minute: int = Field(ge=1, le=1_000_000)
    tokens_per_minute: int = Field(ge=1, le=1_000_000_000)
    tokens_per_call: int = Field(default=4_000, ge=1, le=10_000_000)
    burst_seconds: int = Field(default=5, ge=1, le=59)

    @model_validator(mode="after")
    def _call_fits(self) -> "RateSettings":
        if self.tokens_per_call > self.tokens_per_minute:
            raise ValueError("tokens_per_call: more than tokens_per_minute (no call could ever be made)")
        return self


class FleetSettings(BaseModel):
    """Concurrency keys and the rate limits of the models runs call (model id -> its quota)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    concurrency: ConcurrencySettings | None = None
    rate_limits: dict[str, RateSettings] = Field(default_factory=dict, max_length=50)

    def variable(self) -> str:
        """The value of ``LONGSTEP_FLEET``."""
        return self.model_dump_json(exclude_none=True)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "FleetSettings":
        """The settings from ``LONGSTEP_FLEET`` (none set: everything off).

        Raises:
            SettingsError: the variable is not this model's JSON.
        """
        env = environment.environ() if environ is None else environ
        raw = env.get(ENV_FLEET)
        if not raw:
            return cls()
        try:
            return cls.model_validate_json(raw)
        except ValidationError as exc:
            raise SettingsError(f"environment variable {ENV_FLEET}: {exc.errors()[0]['msg']}") from None
