"""Read tools inside ModelTurn (``longstep.tasks.inline_tools``), on moto with the real handlers:
an agent's own ModelTurn records a read turn's calls as CallTool's steps and routes ``inline``;
the shared ModelTurn, a write, too little time left or a failing read leave the calls to CallTool."""

from __future__ import annotations

import dataclasses
import json

import pytest

from longstep import keys
from longstep import settings as env
from longstep.agents import AgentCatalog
from longstep.errors import ThrottledError
from longstep.contract.cursor import Route
from longstep.store import decode_json, plain_item
from longstep.settings import ENV_INLINE_RESERVE_SECONDS, ENV_INLINE_TOOLS

from tests.functional.conftest import drive_to, handler, load_event

INLINE = {"triage": "agents.triage_inline:build"}


@pytest.fixture
def own_model_turn(aws, monkeypatch):
    """The environment the stack gives the triage agent's own ModelTurn (FakeContext: 60 s left)."""
    monkeypatch.setenv(env.ENV_AGENTS, json.dumps(INLINE))
    monkeypatch.setenv(ENV_INLINE_TOOLS, json.dumps(["read_document", "search_docs"]))
    monkeypatch.setenv(ENV_INLINE_RESERVE_SECONDS, "30")
    return aws


def _record(aws, turn: int, call: int) -> dict | None:
    item = aws["ddb"].get_item(TableName="checkpoints", Key={"pk": {"S": "func-run-1"}, "sk": {"S": keys.tool_step_key(turn, call)}}).get("Item")
    return None if item is None else plain_item(item)


def test_a_read_turn_is_recorded_inside_model_turn_and_call_tool_replays_it(own_model_turn):
    aws = own_model_turn
    handler("init_run")(load_event("init_run"))
    out = handler("model_turn")(load_event("model_turn"))
    assert out["route"] == Route.INLINE and out["next_turn"] == 1
    record = _record(aws, 0, 0)
    assert (record["kind"], record["name"]) == ("tool", "search_docs")
    assert decode_json("result", record)["content"]["results"][0]["doc_id"] == "incident-2041"
    # The same step CallTool would run: CallTool (a retried Map, a fallback) replays it.
    again = handler("call_tool")({"run_id": "func-run-1", "turn": 0, "call": 0, "tool": "search_docs"})
    assert again["replayed"] is True and again["status"] == "success"
    # ModelTurn re-invoked (a retry after a crash): the reply and the call replay.
    assert handler("model_turn")(load_event("model_turn"))["route"] == Route.INLINE


def test_two_reads_run_in_order_and_a_write_goes_to_call_tool(own_model_turn):
    aws = own_model_turn
    drive_to(1)
    assert handler("model_turn")({"run_id": "func-run-1", "next_turn": 1})["route"] == Route.INLINE
    assert [_record(aws, 1, call)["name"] for call in (0, 1)] == ["read_document", "read_document"]
    out = handler("model_turn")({"run_id": "func-run-1", "next_turn": 2})
    assert out["route"] == Route.TOOL and out["tool"] == "file_ticket"  # keyed: not a read
    assert _record(aws, 2, 0) is None


def test_the_shared_model_turn_never_inlines(own_model_turn, monkeypatch):
    monkeypatch.delenv(ENV_INLINE_TOOLS)  # the shared ModelTurn holds no agent's grants: no list
    handler("init_run")(load_event("init_run"))
    assert handler("model_turn")(load_event("model_turn"))["route"] == Route.TOOL
    assert _record(own_model_turn, 0, 0) is None


def test_too_little_time_left_leaves_the_call_to_call_tool(own_model_turn, monkeypatch):
    monkeypatch.setenv(ENV_INLINE_RESERVE_SECONDS, "61")  # more than the invocation has left
    handler("init_run")(load_event("init_run"))
    assert handler("model_turn")(load_event("model_turn"))["route"] == Route.TOOL
    assert _record(own_model_turn, 0, 0) is None


def test_a_read_that_fails_inline_is_released_and_call_tool_runs_it(own_model_turn, monkeypatch):
    agent = AgentCatalog(INLINE)("triage")
    item = agent.tools.tools["search_docs"]
    failing = dataclasses.replace(item, fn=lambda args, ctx: (_ for _ in ()).throw(ThrottledError("throttled")))
    monkeypatch.setitem(agent.tools.tools, "search_docs", failing)
    handler("init_run")(load_event("init_run"))
    out = handler("model_turn")(load_event("model_turn"))
    assert out["route"] == Route.TOOL and out["call"] == 0  # to CallOneTool, with its retries and escalation
    assert _record(own_model_turn, 0, 0) is None  # the claim released: CallTool claims it at once
    monkeypatch.setitem(agent.tools.tools, "search_docs", item)
    done = handler("call_tool")({**out, "run_id": "func-run-1"})
    assert (done["replayed"], done["status"]) == (False, "success")


def test_an_interrupt_the_turn_took_does_not_cancel_its_inline_reads(own_model_turn):
    # The user's message (with an interrupt) reaches this turn's model call, which clears the
    # interrupt: CallTool, reading the run afresh, would run the calls; so does ModelTurn.
    from longstep import clients, steering
    from longstep.store import CheckpointStore

    handler("init_run")(load_event("init_run"))
    store = CheckpointStore("checkpoints", clients.client("dynamodb"))
    steering.send(store, "func-run-1", "look at the payments runbook too")
    steering.interrupt(store, "func-run-1")
    assert handler("model_turn")(load_event("model_turn"))["route"] == Route.INLINE
    assert decode_json("result", _record(own_model_turn, 0, 0))["status"] == "success"
