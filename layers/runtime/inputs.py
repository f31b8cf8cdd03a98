"""The execution's start input (Init's), how a task parses its input, and its task token (the
records that travel between the other steps: ``longstep.contract``)."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from longstep.budget import Budget
from longstep.contract.ids import MAX_CALLS_PER_TURN, MAX_TURNS, RunId, Turn, check_run_id

# Re-exported: the run id's rule is read from here by the CLI, the run UI and the approval API.
from longstep.contract.ids import MAX_RUN_ID, RUN_ID_PATTERN, RUN_ID_RULE  # noqa: F401
from longstep.errors import InvalidInputError, describe_validation_error
from longstep.models.settings import ModelSettings

# A tenant or a tag: a DynamoDB key part of the runs index (``longstep.runs_index``), so no '#'
# (the facet separator) and nothing a query would have to quote.
LABEL_PATTERN = r"^[A-Za-z0-9_.:@+=/-]+$"
MAX_TAGS = 10


class ModelChoice(ModelSettings):
    """Which model answers this run: overrides the agent's ``Agent.model`` field by field.

    Attributes:
        provider: a registered provider (``bedrock``, ``anthropic``, ``openai``, ``scripted``, or
            one added by configuration); the agent's, else ``bedrock``, when omitted.
        model_id: the provider's model id; the agent's (same provider), else the stack's default
            for ``bedrock``, when omitted.
        temperature: sampling temperature; the agent's, else 0, when omitted.
        max_tokens: the reply's token cap; the agent's, else 4096, when omitted.
        script_uri: ``s3://bucket/key`` of the script, for the scripted provider.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    script_uri: str | None = None

    @field_validator("script_uri")
    @classmethod
    def _s3_uri(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("s3://"):
            raise ValueError("must start with s3://")
        return value

    @model_validator(mode="after")
    def _script_for_scripted(self) -> "ModelChoice":
        if self.provider == "scripted" and not self.script_uri:
            raise ValueError("script_uri is required when provider is 'scripted'")
        return self


class ParentLink(BaseModel):
    """Set on a child run's start input (``longstep.subagents``): the call of the parent run that
    waits for it, and the child's depth in the tree of runs.

    Attributes:
        run_id: the parent run.
        turn: the parent's turn that delegated.
        call: the call of that turn.
        depth: the child's depth (the parent's plus one).
    """

    model_config = ConfigDict(extra="forbid")

    run_id: RunId
    turn: Turn
    call: int = Field(ge=0, lt=MAX_CALLS_PER_TURN)
    depth: int = Field(ge=1, le=100)


class EvalSpec(BaseModel):
    """Set on an eval run's start input (``longstep eval``, docs/evals.md): the run is a
    counterfactual of a recorded one, and its tool calls never act on the world (``longstep.evals``).

    Attributes:
        of: the recorded run the eval is a counterfactual of.
        at_turn: the eval's first turn under the change (earlier turns replay the record's replies).
        record_uri: ``artifact://sha256/<hex>`` or ``s3://bucket/key`` of the recorded calls
            (``longstep.evals.EvalRecord``'s document).
        approvals: how a call that needs an approver and matches no recorded call is answered:
            ``approve`` (then handled as any call: a read runs, another effect is withheld),
            ``reject`` (the model is told it was rejected) or ``withhold``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    of: RunId
    at_turn: int = Field(default=0, ge=0, le=MAX_TURNS)
    record_uri: str = Field(pattern=r"^(artifact://sha256/[0-9a-f]{64}|s3://.+)$")
    approvals: Literal["approve", "reject", "withhold"] = "withhold"


class StartInput(BaseModel):
    """What ``StartExecution`` is given. The execution name should equal ``run_id``.

    Attributes:
        run_id: the durable identity of the run; starting it again resumes it.
        goal: the task, given to the model as the first user message.
        agent: name of a registered agent (``triage`` in the sample stack).
        max_turns: stop after this many model turns (the stack's default when omitted).
        model: which model provider answers.
        turns_per_execution: hand the run to a fresh execution after this many turns (the
            stack's default, computed to stay under 25,000 history events, when omitted).
        generation: set by continue-as-new: which execution of the run this is (0 = first).
        user: whose run this is; long-term memory is kept per agent and user.
        parent: set on a subagent's run: the parent's call that waits for it.
        deadline: no model turn starts after this instant (ISO 8601 with a time zone): the run
            finishes with what it has (``stop: deadline``). A subagent's run inherits its parent's.
        tenant: whose work this is (a customer, a team): ``longstep runs --where tenant=...``
            selects by it, and a tenant's budget is shared by its runs.
        tags: up to ``MAX_TAGS`` labels of the run, each selectable (``--where tag=...``).
        budget: the run's limit in dollars and/or model tokens (``longstep.budget``): near it the
            run asks for more, at it the run stops (reason ``budget``).
        eval: set on an eval run (``longstep eval``): no tool call of the run acts on the world.
    """

    model_config = ConfigDict(extra="forbid")

    run_id: str
    goal: str = Field(min_length=1, max_length=20_000)
    agent: str = Field(min_length=1, max_length=64)
    max_turns: int | None = Field(default=None, ge=1, le=MAX_TURNS)
    model: ModelChoice = Field(default_factory=ModelChoice)
    turns_per_execution: int | None = Field(default=None, ge=1, le=MAX_TURNS)
    generation: int = Field(default=0, ge=0, le=MAX_TURNS)
    user: str | None = Field(default=None, min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.@+-]+$")
    parent: ParentLink | None = None
    deadline: dt.datetime | None = None
    tenant: str | None = Field(default=None, min_length=1, max_length=64, pattern=LABEL_PATTERN)
    tags: list[Annotated[str, Field(min_length=1, max_length=64, pattern=LABEL_PATTERN)]] = Field(default_factory=list, max_length=MAX_TAGS)

    budget: Budget | None = None
    eval: EvalSpec | None = None

    @field_validator("budget")
    @classmethod
    def _priced(cls, value: Budget | None) -> Budget | None:
        if value is not None and value.usd is not None and value.prices is None:
            raise ValueError("usd needs prices (dollars per million input and output tokens of the run's model)")
        if value is not None and value.usd is None and value.tokens is None:
            raise ValueError("give usd, tokens or both")
        return value

    @field_validator("tags")
    @classmethod
    def _distinct_tags(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("must not repeat a tag")
        return value

    @field_validator("run_id")
    @classmethod
    def _run_id(cls, value: str) -> str:
        return check_run_id(value)

    @field_validator("deadline")
    @classmethod
    def _deadline(cls, value: dt.datetime | None) -> dt.datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("must include a time zone, e.g. 2026-12-01T09:00:00Z")
        return value


def parse_model(model: type[BaseModel], data: Any, what: str) -> Any:
    """Validate ``data`` against ``model`` or raise InvalidInputError naming each bad field."""
    if not isinstance(data, dict):
        raise InvalidInputError(f"{what} must be a JSON object, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidInputError(f"invalid {what}: {describe_validation_error(exc)}") from None


def task_token(event: Any) -> str:
    """The task token of a ``waitForTaskToken`` task's input.

    Raises:
        InvalidInputError: the input carries no token.
    """
    if not isinstance(event, dict) or not isinstance(event.get("token"), str) or not event["token"]:
        raise InvalidInputError("token: a task token string is required")
    return event["token"]
