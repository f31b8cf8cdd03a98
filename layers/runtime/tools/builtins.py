"""Tools every agent has, run through the registry like any tool.

``wait_for`` suspends the run, holding no compute, until a signal arrives, a time passes or a
condition holds. The state machine does the waiting (a task token, a Wait state, or checks with
backoff); the tool's result, recorded like any other, says what ended the wait.
``read_artifact`` pages through an offloaded output; ``remember`` and ``recall`` use long-term
memory. They reach the runtime's services through ``ToolContext.services``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from longstep.contract.call import Check, Signal
from longstep.errors import ToolInputError
from longstep.memory import RECALL, REMEMBER, RecallArgs, RememberArgs
from longstep.tools.registry import Effect, Tool, ToolContext, ToolServices

WAIT_FOR = "wait_for"
READ_ARTIFACT = "read_artifact"
# A page stays well under the offload threshold, so it is never offloaded again.
MAX_PAGE_CHARS = 8_000
MAX_WAIT_SECONDS = 365 * 86_400  # Step Functions Standard executions last at most a year


class WaitForArgs(BaseModel):
    """Wait for an event (``event``, optional ``match``, ``timeout_seconds``), a time (``seconds``
    from now, or ``until`` an ISO 8601 instant), or a condition on a system that cannot push
    (``condition`` with ``args``, checked with exponential backoff from ``check_every_seconds``
    until ``timeout_seconds``)."""

    model_config = ConfigDict(extra="forbid")

    event: str | None = Field(default=None, min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$")
    match: dict[str, Any] = Field(default_factory=dict, description="the signal's payload must contain these key/values")
    timeout_seconds: int = Field(default=86_400, ge=1, le=MAX_WAIT_SECONDS)
    seconds: int | None = Field(default=None, ge=1, le=MAX_WAIT_SECONDS)
    until: dt.datetime | None = None
    condition: str | None = Field(default=None, min_length=1, max_length=128)
    args: dict[str, Any] = Field(default_factory=dict, description="arguments of the condition's check")
    check_every_seconds: int = Field(default=30, ge=1, le=86_400, description="first interval between checks; it doubles")

    @model_validator(mode="after")
    def _one_kind(self) -> "WaitForArgs":
        kinds = [name for name in ("event", "seconds", "until", "condition") if getattr(self, name) is not None]
        if len(kinds) != 1:
            raise ValueError("give exactly one of event, seconds, until or condition")
        if self.until is not None and self.until.tzinfo is None:
            raise ValueError("until must include a time zone, e.g. 2026-12-01T09:00:00Z")
        return self

    def timer_until(self, now: dt.datetime) -> str:
        """When a timer wait ends, as the ISO 8601 UTC instant a Wait state's TimestampPath reads."""
        end = self.until if self.until is not None else now + dt.timedelta(seconds=self.seconds or 0)
        return end.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class ReadArtifactArgs(BaseModel):
    """Read part of an offloaded output by its reference."""

    model_config = ConfigDict(extra="forbid")

    ref: str = Field(pattern=r"^artifact://sha256/[0-9a-f]{64}$", description="the offloaded output's uri")
    offset: int = Field(default=0, ge=0, description="first character to return")
    length: int = Field(default=4_000, ge=1, le=MAX_PAGE_CHARS, description="how many characters")


def _services(ctx: ToolContext) -> ToolServices:
    if ctx.services is None:
        raise ToolInputError("this tool runs only inside a CallTool task (the runtime's services are missing)")
    return ctx.services


def read_artifact(args: ReadArtifactArgs, ctx: ToolContext) -> dict[str, Any]:
    """A page of an offloaded output (artifacts are content-addressed: a page never changes)."""
    artifacts = _services(ctx).artifacts
    try:
        text = artifacts.get(args.ref).decode("utf-8", errors="replace")
    except artifacts.client.exceptions.NoSuchKey:
        raise ToolInputError(f"ref: no artifact {args.ref}") from None
    page = text[args.offset : args.offset + args.length]
    return {"ref": args.ref, "offset": args.offset, "length": len(page), "total_chars": len(text), "text": page}


def _memory(ctx: ToolContext) -> Any:
    services = _services(ctx)
    if services.memory is None:
        raise ToolInputError("long-term memory is not configured for this deployment")
    return services.memory


def remember(args: RememberArgs, ctx: ToolContext) -> dict[str, Any]:
    """Keep a fact in the run's memory namespace (the same key replaces it)."""
    return _memory(ctx).put(_services(ctx).memory_namespace, args.key, args.value, ctx.run_id)


def recall(args: RecallArgs, ctx: ToolContext) -> dict[str, Any]:
    """Facts of the run's memory namespace matching the query."""
    return {"memories": _memory(ctx).recall(_services(ctx).memory_namespace, args.query, args.limit)}


def wait_for(args: WaitForArgs, ctx: ToolContext) -> dict[str, Any]:
    """What ended the wait the state machine carried out for this call (``ctx.item``)."""
    item = ctx.item
    if item is None or item.wait == "none":
        if item is not None and args.event is not None:  # valid arguments: an event the agent does not declare
            raise ToolInputError(f"wait_for: event {args.event!r} is not one this agent waits on (it declares its events)")
        raise ToolInputError("wait_for: the state machine carried out no wait for this call")
    if item.wait == "timer":
        return {"waited": "timer", "until": item.wait_until}
    if item.wait == "condition":
        check = item.check or Check()
        if check.error:
            raise ToolInputError(check.error)
        outcome = {"waited": "condition", "condition": item.condition, "met": check.met, "waited_seconds": check.waited}
        if check.met:
            outcome["result"] = check.result
        if check.timed_out:
            outcome["timed_out"] = True
        return outcome
    signal = item.signal or Signal()
    if signal.timed_out:
        return {"waited": "event", "event": item.event, "timed_out": True}
    return {"waited": "event", "event": item.event, "payload": signal.payload}


def read_artifact_tool() -> Tool:
    """The ``read_artifact`` tool: pages through an output the context only shows a preview of."""
    return Tool(
        name=READ_ARTIFACT,
        description=(
            "Read part of a large tool output that was stored aside (the context shows only its preview). "
            f"Give its ref (artifact://sha256/...), an offset and a length of at most {MAX_PAGE_CHARS} characters."
        ),
        args_model=ReadArtifactArgs,
        fn=read_artifact,
        effect=Effect.READ,
    )


def memory_tools() -> list[Tool]:
    """``remember`` (keyed by the fact's key: repeating it is harmless) and ``recall``."""
    return [
        Tool(
            name=REMEMBER,
            description="Keep a fact for later runs of this agent (the same key replaces it).",
            args_model=RememberArgs,
            fn=remember,
            effect=Effect.KEYED,
        ),
        Tool(name=RECALL, description="Look up facts kept by earlier runs of this agent.", args_model=RecallArgs, fn=recall, effect=Effect.READ),
    ]


def builtin_tools() -> list[Tool]:
    """The tools every agent has."""
    return [wait_for_tool(), read_artifact_tool(), *memory_tools()]


def wait_for_tool() -> Tool:
    """The ``wait_for`` tool."""
    return Tool(
        name=WAIT_FOR,
        description=(
            "Suspend this run until an event arrives (event, optional match and timeout_seconds) or a "
            "time passes (seconds, or until an ISO 8601 instant). Returns what ended the wait."
        ),
        args_model=WaitForArgs,
        fn=wait_for,
        effect=Effect.READ,
    )
