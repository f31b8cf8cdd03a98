"""Tools every agent has: ``wait_for`` suspends the run, holding no compute, until a signal
arrives or a time passes. The state machine does the waiting (a task token or a Wait state);
the tool's result, recorded like any other, says what ended the wait."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from longstep.tools.registry import Effect, Tool, ToolContext

WAIT_FOR = "wait_for"
MAX_WAIT_SECONDS = 365 * 86_400  # Step Functions Standard executions last at most a year


class WaitForArgs(BaseModel):
    """Wait for an event (``event``, optional ``match``, ``timeout_seconds``) or a time
    (``seconds`` from now, or ``until`` an ISO 8601 instant)."""

    model_config = ConfigDict(extra="forbid")

    event: str | None = Field(default=None, min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$")
    match: dict[str, Any] = Field(default_factory=dict, description="the signal's payload must contain these key/values")
    timeout_seconds: int = Field(default=86_400, ge=1, le=MAX_WAIT_SECONDS)
    seconds: int | None = Field(default=None, ge=1, le=MAX_WAIT_SECONDS)
    until: dt.datetime | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> "WaitForArgs":
        kinds = [name for name in ("event", "seconds", "until") if getattr(self, name) is not None]
        if len(kinds) != 1:
            raise ValueError("give exactly one of event, seconds or until")
        if self.until is not None and self.until.tzinfo is None:
            raise ValueError("until must include a time zone, e.g. 2026-12-01T09:00:00Z")
        return self

    def timer_until(self, now: dt.datetime) -> str:
        """When a timer wait ends, as the ISO 8601 UTC instant a Wait state's TimestampPath reads."""
        end = self.until if self.until is not None else now + dt.timedelta(seconds=self.seconds or 0)
        return end.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _never_called(args: WaitForArgs, ctx: ToolContext) -> Any:  # the loop records the wait's outcome
    raise AssertionError("wait_for is carried out by the state machine")


def wait_for_tool() -> Tool:
    """The ``wait_for`` tool."""
    return Tool(
        name=WAIT_FOR,
        description=(
            "Suspend this run until an event arrives (event, optional match and timeout_seconds) or a "
            "time passes (seconds, or until an ISO 8601 instant). Returns what ended the wait."
        ),
        args_model=WaitForArgs,
        fn=_never_called,
        effect=Effect.READ,
    )
