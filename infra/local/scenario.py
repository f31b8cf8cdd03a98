"""Scenario files (``events/scenarios/*.json``): a start input, a model script, approvals, a world.

A scenario is read in two steps: :func:`load_scenario` checks the file's own shape; then
:func:`check_against_agent` checks it against the agent it names (scripted tool names and
arguments, approval keys, the ``world`` against the agent's world model), before anything is
deployed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from longstep.agent import Agent
from longstep.errors import BadRequestError, ToolArgumentsError, UnknownToolError
from longstep.errors import describe_validation_error
from longstep.json_input import parse_json
from longstep.models.scripted import ScriptedToolCall, ScriptedTurn
from longstep.references import REFERENCE
from longstep_kit.config import AGENT_NAME
from longstep.world import WorldError


class ScenarioError(ValueError):
    """A scenario file is unreadable or invalid; the message names the file and the field."""


class ScenarioInput(BaseModel):
    """The start input, less the model choice (a scenario always uses its script)."""

    model_config = ConfigDict(extra="forbid")

    goal: str = Field(min_length=1)
    agent: str = Field(min_length=1)
    run_id: str | None = None
    max_turns: int | None = Field(default=None, ge=1)
    turns_per_execution: int | None = Field(default=None, ge=1)


class ScenarioDecision(BaseModel):
    """The approver's answer for one scripted tool call, keyed ``"turn:call"`` in the scenario:
    the turn and call of the script, whichever run turn plays it (an injected fault shifts them).

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
    """What a run of the scenario should end with; ``longstep local run`` checks it after the run.

    Attributes:
        status: the run's final status.
        output_contains: phrases the final answer holds.
        duplicate_effects: effects repeated under one idempotency key, counted from the tools'
            ledgers (0 unless the scenario is about a duplicate).
        effects: per tool, how many effects its ledger lists for the run (tools left out are not checked).
    """

    model_config = ConfigDict(extra="forbid")

    status: str = "SUCCEEDED"
    output_contains: list[str] = Field(default_factory=list)
    duplicate_effects: int = Field(default=0, ge=0)
    effects: dict[str, int] = Field(default_factory=dict)


class ScenarioSubagent(BaseModel):
    """The script of a child run (``longstep.subagents``): its turns, and its own children's
    scripts, keyed like the scenario's ``subagents`` by the tool-use id of the delegating call."""

    model_config = ConfigDict(extra="forbid")

    turns: dict[int, ScriptedTurn]
    subagents: dict[str, "ScenarioSubagent"] = Field(default_factory=dict)

    def script(self) -> dict[str, Any]:
        """The child's model script document (``longstep.models.scripted.Script``)."""
        return _script(self.turns, self.subagents)


def _script(turns: dict[int, ScriptedTurn], subagents: dict[str, ScenarioSubagent]) -> dict[str, Any]:
    script: dict[str, Any] = {"turns": {str(k): v.model_dump(exclude_none=True) for k, v in turns.items()}}
    if subagents:  # left out when empty: the scripts (and their content hashes) of other scenarios stay as they were
        script["children"] = {key: child.script() for key, child in sorted(subagents.items())}
    return script


class Scenario(BaseModel):
    """A local run, fully described."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    description: str = ""
    input: ScenarioInput
    turns: dict[int, ScriptedTurn]
    approvals: dict[str, ScenarioDecision] = Field(default_factory=dict)
    signals: list[ScenarioSignal] = Field(default_factory=list)
    world: dict[str, Any] | None = Field(default=None, description="fixtures, checked against the agent's world model")
    invalid_calls: list[str] = Field(default_factory=list, description="'turn:call' of scripted calls that are wrong on purpose")
    expect: Expectation = Field(default_factory=Expectation)
    recorded: dict[str, Any] | None = Field(default=None, description="a run's record, when the file is an export")
    subagents: dict[str, ScenarioSubagent] = Field(
        default_factory=dict, description="scripts of the child runs, by the tool-use id (t<turn>c<call>) of the delegating call"
    )
    agents: dict[Annotated[str, Field(pattern=AGENT_NAME)], Annotated[str, Field(pattern=REFERENCE.pattern)]] = Field(
        default_factory=dict,
        description="agents the run needs beyond the project's cdk.json (name -> module:callable), registered for this local run as --agent would",
    )

    @field_validator("approvals", "invalid_calls")
    @classmethod
    def _call_keys(cls, value: Any) -> Any:
        for key in value:
            turn, _, call = key.partition(":")
            if not (turn.isdigit() and call.isdigit()):
                raise ValueError(f"key {key!r} must be 'turn:call', e.g. '3:0'")
        return value

    def scripted_call(self, key: str) -> ScriptedToolCall | None:
        """The scripted call ``"turn:call"``, if the script has it."""
        turn, _, call = key.partition(":")
        scripted = self.turns.get(int(turn))
        if scripted is None or int(call) >= len(scripted.tool_calls):
            return None
        return scripted.tool_calls[int(call)]

    def call_ids(self) -> dict[str, str]:
        """toolUseId -> ``"turn:call"`` of the script: how a recorded reply names the scripted call
        it came from (the scripted model's ids are ``t<turn>c<call>`` unless the script sets ``id``)."""
        return {
            call.id or f"t{turn}c{index}": f"{turn}:{index}"
            for turn, scripted in self.turns.items()
            for index, call in enumerate(scripted.tool_calls)
        }

    def script(self) -> dict[str, Any]:
        """The model script document the scripted provider reads."""
        return _script(self.turns, self.subagents)


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file.

    Raises:
        ScenarioError: the file is missing, not JSON, or a field is invalid (named by its path).
    """
    return load_model_file(path, Scenario)


def load_model_file(path: str | Path, model: type[BaseModel]) -> Any:
    """Read a JSON file into ``model`` (a scenario of either kind).

    Raises:
        ScenarioError: the file is missing, not JSON, too deep, or a field is invalid (named by its path).
    """
    path = Path(path)
    try:
        data = parse_json(path.read_text(), str(path))
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such scenario file") from None
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"{path}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start}); save it as UTF-8 JSON") from None
    except BadRequestError as exc:
        raise ScenarioError(str(exc)) from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(f"{path}: {describe_validation_error(exc)}") from None


def check_against_agent(scenario: Scenario, agent: Agent, source: str = "scenario") -> Any:
    """Check a scenario against the agent it runs, before anything is deployed.

    Checks: turn 0 exists; each scripted call names a tool of the agent with arguments its
    schema accepts (unless listed in ``invalid_calls``); tool ids are unique; each approval key
    names a scripted call that needs approval; ``world`` fits the agent's world model.

    Returns:
        The validated world (an instance of the agent's world model), or None when there is none.

    Raises:
        ScenarioError: one line, naming the file and the field.
    """
    if 0 not in scenario.turns:
        raise ScenarioError(f"{source}: turns: the script has no turn 0 (the run's first model call plays turn 0)")
    seen: dict[str, str] = {}
    for turn in sorted(scenario.turns):
        for index, call in enumerate(scenario.turns[turn].tool_calls):
            key, field = f"{turn}:{index}", f"turns.{turn}.tool_calls.{index}"
            use_id = call.id or f"t{turn}c{index}"
            if use_id in seen:
                raise ScenarioError(f"{source}: {field}.id: {use_id!r} is also the id of call {seen[use_id]}")
            seen[use_id] = key
            if key in scenario.invalid_calls:
                continue
            try:
                agent.tools.get(call.name).parse_args(call.input)
            except UnknownToolError as exc:
                raise ScenarioError(f"{source}: {field}.name: {exc}") from None
            except ToolArgumentsError as exc:
                raise ScenarioError(f"{source}: {field}.input: {exc}") from None
    call_ids = scenario.call_ids()
    for use_id in scenario.subagents:
        scripted = scenario.scripted_call(call_ids.get(use_id, "-1:0"))
        if scripted is None or scripted.name not in agent.subagents:
            raise ScenarioError(f"{source}: subagents.{use_id}: the script has no call with this id to a subagent of {agent.name!r}")
    for key in scenario.approvals:
        call = scenario.scripted_call(key)
        if call is None:
            raise ScenarioError(f"{source}: approvals.{key}: the script has no call {key} (keys are 'turn:call' of the script)")
        known = agent.tools.tools.get(call.name)
        if known is None or not known.requires_approval:
            raise ScenarioError(f"{source}: approvals.{key}: {call.name} does not require approval, so no decision is asked for")
        decision = scenario.approvals[key]
        if decision.decision == "edit":
            try:
                known.parse_args(decision.input)
            except ToolArgumentsError as exc:
                raise ScenarioError(f"{source}: approvals.{key}.input: {exc}") from None
    _check_signals(scenario, source)
    if scenario.world is None:
        return None
    if agent.world is None:
        raise ScenarioError(f"{source}: world: agent {agent.name!r} declares no world model (Agent.world) to seed")
    try:
        return agent.world.parse(scenario.world)
    except WorldError as exc:
        raise ScenarioError(f"{source}: {exc}") from None


def _check_signals(scenario: Scenario, source: str) -> None:
    """Each signal names an event a scripted ``wait_for`` waits on: one that nobody waits on would
    be kept forever while the wait it was meant for times out, and the run would still end green."""
    waited: set[str] = set()
    scripts = [scenario.turns, *(child.turns for child in _children(scenario.subagents))]
    for turns in scripts:
        for turn in turns.values():
            waited |= {str(c.input["event"]) for c in turn.tool_calls if c.name == "wait_for" and c.input.get("event")}
    for index, signal in enumerate(scenario.signals):
        if signal.event not in waited:
            shown = ", ".join(sorted(waited)) or "none"
            raise ScenarioError(f"{source}: signals[{index}].event: no scripted wait_for waits on {signal.event!r} (the script waits on: {shown})")


def _children(subagents: dict[str, ScenarioSubagent]) -> list[ScenarioSubagent]:
    out = []
    for child in subagents.values():
        out += [child, *_children(child.subagents)]
    return out


def unmet_expectations(expect: Expectation, report: dict[str, Any]) -> list[str]:
    """How a run's report differs from what the scenario expects: one line per difference."""
    out = []
    if report.get("status") != expect.status:
        out.append(f"status: expected {expect.status}, got {report.get('status')}")
    output = report.get("output") or ""
    out += [f"output_contains: {phrase!r} is not in the output" for phrase in expect.output_contains if phrase not in output]
    effects = report.get("effects") or {}
    duplicates = effects.get("duplicate_effects", 0)
    if duplicates != expect.duplicate_effects:
        repeated = ", ".join(f"{key} x{n}" for dups in (effects.get("duplicates") or {}).values() for key, n in dups.items())
        out.append(f"duplicate_effects: expected {expect.duplicate_effects}, got {duplicates}" + (f" ({repeated})" if repeated else ""))
    counted = effects.get("by_tool") or {}
    for tool, wanted in sorted(expect.effects.items()):
        if counted.get(tool) != wanted:
            out.append(f"effects.{tool}: expected {wanted}, got {counted.get(tool, 'no ledger')}")
    return out
