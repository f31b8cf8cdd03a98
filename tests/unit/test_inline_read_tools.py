"""``Agent.inline_read_tools``: which tools may run inside ModelTurn, and a clear refusal naming the
field for one that may not."""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import BaseModel

from agents import triage
from longstep import Agent, Effect, ToolRegistry, tool


class _Args(BaseModel):
    x: int = 0


def _agent(**kwargs) -> Agent:
    registry = ToolRegistry()

    def look(args: _Args, ctx) -> int:
        """Look."""
        return args.x

    def ask(args: _Args, ctx) -> int:
        """Ask first."""
        return args.x

    tool(registry, effect=Effect.READ)(look)
    tool(registry, effect=Effect.READ, requires_approval=True)(ask)
    return Agent(name="probe", system_prompt="p", tools=registry, subagents=("helper",), **kwargs)


def test_true_takes_every_read_that_needs_no_approval_and_no_wait():
    assert _agent(inline_read_tools=True).inline_tools() == {"look", "read_artifact", "recall"}
    assert _agent().inline_tools() == frozenset()  # off by default
    assert sorted(dataclasses.replace(triage.build(), inline_read_tools=True).inline_tools()) == [
        "read_artifact",
        "read_document",
        "recall",
        "search_docs",
    ]


def test_a_tuple_names_the_tools():
    assert _agent(inline_read_tools=["look"]).inline_tools() == {"look"}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (("remember",), "inline_read_tools: tool 'remember' cannot run inside ModelTurn: its effect is keyed, not read"),
        (("ask",), "inline_read_tools: tool 'ask' cannot run inside ModelTurn: it requires approval"),
        (("wait_for",), "inline_read_tools: tool 'wait_for' cannot run inside ModelTurn: it waits"),
        (("helper",), "inline_read_tools: tool 'helper' cannot run inside ModelTurn: it waits"),
        (("nope",), "inline_read_tools: 'nope' is not a tool of agent 'probe'"),
        ("look", "inline_read_tools: expected True, False or a tuple of tool names, got 'look'"),
    ],
)
def test_a_tool_that_cannot_run_inline_is_refused_naming_the_field(value, message):
    with pytest.raises(ValueError) as caught:
        _agent(inline_read_tools=value)
    assert str(caught.value).startswith(message)


def test_the_docs_example():
    from tests.unit.test_examples import load_example

    inline_reads = load_example("examples/agents/inline_reads.py")

    assert inline_reads.every_read.inline_tools() == {"lookup", "read_artifact", "recall"}
    assert inline_reads.only_lookup.inline_tools() == {"lookup"}
