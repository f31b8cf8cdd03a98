"""The code version a run records: a change to the runtime, the agent's code or its tool schemas
changes it, and only the part that changed."""

from __future__ import annotations

from pydantic import BaseModel

from longstep.agent import Agent
from longstep.code_version import code_parts, code_version, tool_schemas
from longstep.tools.registry import Effect, ToolContext, ToolRegistry, tool


class NoteArgs(BaseModel):
    text: str


class RenamedNoteArgs(BaseModel):
    body: str


def _agent(args_model: type[BaseModel] = NoteArgs, effect: Effect = Effect.READ, prompt: str = "be brief", name: str = "note") -> Agent:
    registry = ToolRegistry()

    def note(args: NoteArgs, ctx: ToolContext) -> str:
        return "ok"

    note.__annotations__["args"] = args_model
    tool(registry, effect=effect, name=name, check=(lambda a, c: None) if effect is Effect.CHECK_THEN_ACT else None)(note)
    return Agent(name="notes", system_prompt=prompt, tools=registry)


def test_the_same_code_has_the_same_version():
    first, second = code_parts(_agent()), code_parts(_agent())
    assert first == second
    assert set(first) == {"runtime", "agent", "tools"} and all(len(v) == 16 for v in first.values())
    assert len(code_version(first)) == 16


def test_a_changed_schema_effect_or_name_changes_the_tools_part_only():
    base = code_parts(_agent())
    for changed in (_agent(args_model=RenamedNoteArgs), _agent(effect=Effect.CHECK_THEN_ACT), _agent(name="jot")):
        parts = code_parts(changed)
        assert parts["tools"] != base["tools"]
        assert parts["runtime"] == base["runtime"] and parts["agent"] == base["agent"]
        assert code_version(parts) != code_version(base)


def test_a_changed_prompt_changes_the_agent_part():
    base, changed = code_parts(_agent()), code_parts(_agent(prompt="be thorough"))
    assert changed["agent"] != base["agent"] and changed["tools"] == base["tools"]


def test_the_agent_part_hashes_the_package_the_tools_are_defined_in():
    from agents.triage import build

    parts = code_parts(build())
    # This module's tools are in the tests package; the triage agent's in agents/: different code.
    assert parts["agent"] != code_parts(_agent())["agent"]
    assert "send_email" in tool_schemas(build()) and tool_schemas(build())["send_email"]["effect"] == "at_most_once"
