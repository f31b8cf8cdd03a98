"""Scenario files (``events/scenarios/*.json``): a start input, a model script, approvals, a world."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from longstep.inputs import describe_validation_error
from longstep.models.scripted import ScriptedTurn


class ScenarioError(ValueError):
    """A scenario file is unreadable or invalid; the message names the file and the field."""


class DocumentSeed(BaseModel):
    """A document put into the documents table; ``body`` is repeated ``repeat`` times."""

    model_config = ConfigDict(extra="forbid")

    doc_id: str = Field(min_length=1)
    title: str = Field(min_length=1)
    summary: str = ""
    body: str = ""
    repeat: int = Field(default=1, ge=1, le=100_000)

    def full_body(self) -> str:
        return self.body * self.repeat


class TicketSeed(BaseModel):
    """An existing ticket in the backlog."""

    model_config = ConfigDict(extra="forbid")

    ticket_id: str = Field(min_length=1)
    title: str = Field(min_length=1)
    body: str = ""
    priority: str = "P3"
    status: str = "open"


class WorldSeed(BaseModel):
    """What the sample world holds before the run starts."""

    model_config = ConfigDict(extra="forbid")

    documents: list[DocumentSeed] = Field(default_factory=list)
    tickets: list[TicketSeed] = Field(default_factory=list)


class ScenarioInput(BaseModel):
    """The start input, less the model choice (a scenario always uses its script)."""

    model_config = ConfigDict(extra="forbid")

    goal: str = Field(min_length=1)
    agent: str = Field(min_length=1)
    run_id: str | None = None
    max_turns: int | None = Field(default=None, ge=1)
    turns_per_execution: int | None = Field(default=None, ge=1)


class ScenarioDecision(BaseModel):
    """The approver's answer for one tool call, keyed ``"turn:call"`` in the scenario.

    ``timeout`` means nobody answers: the approval's task token times out.
    """

    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "reject", "edit", "timeout"]
    reason: str | None = None
    input: dict[str, Any] | None = None


class ScenarioSignal(BaseModel):
    """A signal the local run sends: at the ``start`` of the run (before anyone waits: it is
    kept until a wait takes it) or once a ``wait_for`` on its event is ``waiting``."""

    model_config = ConfigDict(extra="forbid")

    event: str = Field(min_length=1)
    payload: dict[str, Any] = Field(default_factory=dict)
    at: Literal["start", "waiting"] = "waiting"


class Expectation(BaseModel):
    """What a run of the scenario should end with (checked by tests, reported by the CLI)."""

    model_config = ConfigDict(extra="forbid")

    status: str = "SUCCEEDED"
    output_contains: list[str] = Field(default_factory=list)


class Scenario(BaseModel):
    """A local run, fully described."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    description: str = ""
    input: ScenarioInput
    turns: dict[int, ScriptedTurn]
    approvals: dict[str, ScenarioDecision] = Field(default_factory=dict)
    signals: list[ScenarioSignal] = Field(default_factory=list)
    world: WorldSeed = Field(default_factory=WorldSeed)
    expect: Expectation = Field(default_factory=Expectation)
    recorded: dict[str, Any] | None = Field(default=None, description="a run's record, when the file is an export")

    @field_validator("approvals")
    @classmethod
    def _approval_keys(cls, value: dict[str, ScenarioDecision]) -> dict[str, ScenarioDecision]:
        for key in value:
            turn, _, call = key.partition(":")
            if not (turn.isdigit() and call.isdigit()):
                raise ValueError(f"key {key!r} must be 'turn:call', e.g. '3:0'")
        return value

    def script(self) -> dict[str, Any]:
        """The model script document the scripted provider reads."""
        return {"turns": {str(k): v.model_dump(exclude_none=True) for k, v in self.turns.items()}}


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file.

    Raises:
        ScenarioError: the file is missing, not JSON, or a field is invalid (named by its path).
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such scenario file") from None
    except json.JSONDecodeError as exc:
        raise ScenarioError(f"{path}: not valid JSON: {exc}") from None
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(f"{path}: {describe_validation_error(exc)}") from None
