"""``replay_export``: an exported run re-executed on the current code, in process, with its
recorded replies and tool results. Passes on compatible changes, reports incompatible ones.

The export is made here, in process: a small agent runs on an in-memory table through the real
tasks (Init, ModelTurn, CallTool), then ``export_run`` writes it as ``longstep export`` does.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import pytest
from pydantic import BaseModel, Field

from longstep import context
from longstep.agent import Agent
from longstep.errors import InvalidInputError
from longstep.inmemory import InMemoryStore
from longstep.models.scripted import ScriptedProvider, parse_script
from longstep.policy import Verdict
from longstep.runtime import Runtime
from longstep.settings import Settings
from longstep.steps import NoLock
from longstep.tasks.model_turn import model_turn
from longstep.tasks.init_run import start_run
from longstep.tasks.call_tool import call_tool
from longstep.tools.registry import Effect, ToolContext, ToolRegistry, tool
from longstep_kit.ops.export import export_run
from longstep_kit.ops.replay import ExportArtifacts, replay_export

SCRIPT = {
    "0": {"tool_calls": [{"name": "lookup", "input": {"key": "a"}}]},
    "1": {"tool_calls": [{"name": "file_note", "input": {"text": "x"}}, {"name": "send", "input": {"to": "bob"}}]},
    "2": {"tool_calls": [{"name": "lookup", "input": {"key": ""}}]},  # the model's mistake: corrected
    "3": {"text": "done: filed and sent"},
}


class LookupArgs(BaseModel):
    key: str = Field(min_length=1)


class NoteArgs(BaseModel):
    text: str
    priority: int = 3


class SendArgs(BaseModel):
    to: str


def build(
    *,
    rename: dict[str, str] | None = None,
    note_args: type[BaseModel] = NoteArgs,
    note_effect: Effect = Effect.KEYED,
    send_approval: bool = True,
    verifier: Callable[[str, list[Any]], Verdict] | None = None,
    extra_tool: bool = False,
    description: str = "File a note.",
) -> Agent:
    """The test agent, or a variant of it (the 'new code' of a deploy)."""
    names = rename or {}
    registry = ToolRegistry()

    def lookup(args: LookupArgs, ctx: ToolContext) -> dict[str, Any]:
        return {"value": args.key.upper()}

    def file_note(args: NoteArgs, ctx: ToolContext) -> dict[str, Any]:
        return {"note": ctx.idempotency_key}

    def send(args: SendArgs, ctx: ToolContext) -> str:
        return f"sent to {args.to}"

    file_note.__annotations__["args"] = note_args
    file_note.__doc__ = description
    tool(registry, name=names.get("lookup", "lookup"))(lookup)
    tool(
        registry,
        name=names.get("file_note", "file_note"),
        effect=note_effect,
        check=(lambda a, c: None) if note_effect is Effect.CHECK_THEN_ACT else None,
    )(file_note)
    tool(registry, name=names.get("send", "send"), effect=Effect.AT_MOST_ONCE, requires_approval=send_approval)(send)
    if extra_tool:
        tool(registry, name="archive")(lookup)
    return Agent(name="notes", system_prompt="take notes", tools=registry, verifier=verifier)


@pytest.fixture(scope="module")
def exported() -> dict[str, Any]:
    """A finished run of the test agent, exported."""
    agent = build()
    store = InMemoryStore("replay-test-source")
    artifacts = ExportArtifacts({})
    rt = Runtime(
        settings=Settings(checkpoint_table=store.table_name, idempotency_table="i", artifact_bucket="b"),
        store=store,
        artifacts=artifacts,
        lock=NoLock(),
        resolve_agent=lambda name: agent,
        model_override=ScriptedProvider(parse_script({"turns": SCRIPT})),
    )
    cursor = start_run(rt, {"run_id": "notes-1", "goal": "file a note and tell bob", "agent": "notes", "max_turns": 10})
    while True:
        out = model_turn(rt, cursor)
        for call in out["calls"]:
            call_tool(rt, {**call, "decision": {"decision": "approve"} if call["approval"] else None})
        if out["route"] == "done":
            break
        cursor = out
    context.forget_cache()
    return export_run(store, artifacts, "notes-1")


def replay(exported: dict[str, Any], agent: Agent):
    return replay_export(copy.deepcopy(exported), lambda name: agent)


def test_the_export_holds_what_a_replay_checks(exported):
    recorded = exported["recorded"]
    assert set(recorded["replies"]) == {"0", "1", "2", "3"}
    assert set(recorded["tool_results"]) == {"0:0", "1:0", "1:1", "2:0"}
    assert recorded["tool_results"]["2:0"]["content"]["kind"] == "ToolArgumentsError"
    assert recorded["tool_effects"]["send"] == {"effect": "at_most_once", "requires_approval": True}
    assert len(recorded["code_version"]) == 16


def test_the_same_code_replays_every_turn_and_call(exported):
    report = replay(exported, build())
    assert report.ok, report.divergences
    assert (report.turns, report.calls) == (4, 4)


@pytest.mark.parametrize(
    "change",
    [
        {"extra_tool": True},  # a new tool
        {"description": "File a note in the notebook."},  # a new description
        {"note_args": type("NoteArgs", (NoteArgs,), {"__annotations__": {"tag": str | None}, "tag": None})},  # a new optional field
    ],
    ids=["new-tool", "new-description", "new-optional-argument"],
)
def test_a_compatible_change_replays(exported, change):
    report = replay(exported, build(**change))
    assert report.ok, report.divergences


class StrictNoteArgs(BaseModel):
    text: str
    owner: str  # a new required field: the recorded call lacks it


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"rename": {"file_note": "write_note"}}, "turn 1 call 0: tool 'file_note' no longer exists"),
        ({"note_args": StrictNoteArgs}, "turn 1 call 0: the recorded arguments no longer validate: arguments of file_note: owner"),
        ({"note_effect": Effect.AT_MOST_ONCE}, "turn 1 call 0: tool 'file_note' changed effect class: keyed -> at_most_once"),
        ({"send_approval": False}, "turn 1 call 1: tool 'send' changed approval: requires_approval True -> False"),
        (
            {"verifier": lambda answer, messages: Verdict(ok=False, feedback="cite the note id")},
            "turn 3: the record ends the run here; the current code goes on (correct)",
        ),
    ],
    ids=["renamed-tool", "new-required-argument", "effect-class", "approval", "verifier"],
)
def test_an_incompatible_change_diverges_and_says_where(exported, change, expected):
    report = replay(exported, build(**change))
    assert not report.ok
    assert any(d.startswith(expected) for d in report.divergences), report.divergences


def test_a_recorded_model_mistake_is_not_held_against_the_new_code(exported):
    # Turn 2's lookup with an empty key failed validation when recorded: it never ran. A new
    # schema that would accept it changes nothing for an in-flight run.
    class LaxLookup(BaseModel):
        key: str

    agent = build()
    agent.tools.tools["lookup"] = type(agent.tools.tools["lookup"])(**{**agent.tools.tools["lookup"].__dict__, "args_model": LaxLookup})
    assert replay(exported, agent).ok


def test_a_missing_agent_is_a_divergence(exported):
    from longstep.errors import UnknownAgentError

    def gone(name: str) -> Agent:
        raise UnknownAgentError(f"agent: unknown agent {name!r}")

    report = replay_export(copy.deepcopy(exported), gone)
    assert report.divergences == ["agent: agent: unknown agent 'notes'"]


def test_an_older_export_without_recorded_effects_is_checked_from_its_transcript(exported):
    older = copy.deepcopy(exported)
    for name in ("tool_effects", "replies", "tool_results", "code_version"):
        del older["recorded"][name]
    report = replay_export(older, lambda name: build())
    assert report.ok, report.divergences
    assert report.notes == ["the export records no effect classes (exported before they were recorded): not checked"]
    assert not replay_export(copy.deepcopy(older), lambda name: build(rename={"send": "post"})).ok


def test_a_file_that_is_not_an_export_names_the_field():
    with pytest.raises(InvalidInputError, match="recorded"):
        replay_export({"name": "x", "input": {}, "turns": {}}, lambda name: build())
