"""An agent that runs its read tools inside ModelTurn (``Agent.inline_read_tools``), synthesized
beside one that does not: the inlining agent gets a ModelTurn function of its own, granted the
models and its tables' reads and none of its writes; the shared ModelTurn (the other agent's)
holds nothing of its tables; the definition binds each run's ModelTurn and routes an inline turn
straight back to it. The default definition has none of this (the golden copy)."""

from __future__ import annotations

import pytest

import longstep_kit.app
from agents import triage_inline, triage_world
from longstep.contract.cursor import Cursor, Route
from longstep.resources import READ_ITEM_ACTIONS, SCAN_ACTIONS, WRITE_ITEM_ACTIONS
from longstep.tasks.inline_tools import ENV_INLINE_RESERVE_SECONDS, ENV_INLINE_TOOLS
from longstep_kit.config import ConfigError
from longstep_kit.constructs.loop_tasks import MODEL_TURN_VARIABLE
from longstep_kit.testing.asl import all_states, state_machine_definitions

from .conftest import REPO_ROOT, resources_of_type
from .test_agent_resources import _actions_on, _arn, _context, _function, _statements, _tables

AGENTS = {"triage": "agents.triage_inline:build", "invoice": "examples.your_agent:build"}
MODEL_TURN = "longstep_functions.model_turn.lambda_handler"


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    app = longstep_kit.app.build_app(REPO_ROOT, context=_context(AGENTS), outdir=str(tmp_path_factory.mktemp("cdk-inline")))
    (stack,) = app.synth().stacks
    return stack.template


@pytest.fixture(scope="module")
def states(template):
    (definition,) = state_machine_definitions(template).values()
    return all_states(definition)


def _shared_model_turn(template):
    (found,) = [
        (lid, fn)
        for lid, fn in resources_of_type(template, "AWS::Lambda::Function").items()
        if fn["Properties"]["Handler"] == MODEL_TURN and "LONGSTEP_AGENT" not in fn["Properties"]["Environment"]["Variables"]
    ]
    return found


def test_the_inlining_agent_has_a_model_turn_of_its_own_that_may_only_read_its_tables(template):
    lid, fn = _function(template, "triage", MODEL_TURN)
    variables = fn["Properties"]["Environment"]["Variables"]
    assert variables[ENV_INLINE_TOOLS] == '["read_artifact", "read_document", "recall", "search_docs"]'
    assert sorted(triage_inline.build().inline_tools()) == ["read_artifact", "read_document", "recall", "search_docs"]
    # The cap: an inline call starts only with CallTool's timeout left of ModelTurn's.
    _, call_tool = _function(template, "triage", "longstep_functions.call_tool.lambda_handler")
    assert int(variables[ENV_INLINE_RESERVE_SECONDS]) == call_tool["Properties"]["Timeout"] < fn["Properties"]["Timeout"]
    statements = _statements(template, fn)
    tables = _tables(template, "triage")
    reads = set(READ_ITEM_ACTIONS + SCAN_ACTIONS)
    for item in triage_world.RESOURCES:
        granted = _actions_on(statements, _arn(tables[item.name]))
        assert granted == set(item.actions) & reads, item.name
        assert not granted & set(WRITE_ITEM_ACTIONS), f"{lid} may write {item.name}"
    assert any("bedrock:InvokeModel" in _list(s["Action"]) for s in statements)
    # The other agent's tables: nothing.
    for table_lid in _tables(template, "invoice").values():
        assert not _actions_on(statements, _arn(table_lid))


def test_the_shared_model_turn_holds_nothing_of_either_agents_tables(template):
    _, fn = _shared_model_turn(template)
    statements = _statements(template, fn)
    assert ENV_INLINE_TOOLS not in fn["Properties"]["Environment"]["Variables"]
    for agent in AGENTS:
        for table_lid in _tables(template, agent).values():
            assert not _actions_on(statements, _arn(table_lid)), (agent, table_lid)


def test_each_run_binds_its_agents_model_turn_and_an_inline_turn_goes_straight_back_to_it(template, states):
    own, _ = _function(template, "triage", MODEL_TURN)
    shared, _ = _shared_model_turn(template)
    assert f"Agent{own[len('Agent') : -8]}" in states["BindAgent-triage"]["Assign"][MODEL_TURN_VARIABLE]
    assert shared[:-8] in states["BindAgent-invoice"]["Assign"][MODEL_TURN_VARIABLE]
    task = states["ModelTurn"]
    assert task["Parameters"]["FunctionName.$"] == f"${MODEL_TURN_VARIABLE}"
    assert set(task["Parameters"]["Payload"]) == {f"{name}.$" for name in Cursor.model_fields}
    assert task["OutputPath"] == "$.Payload" and task["Next"] == "Route"
    choices = states["Route"]["Choices"]
    assert {c["StringEquals"] for c in choices} == {r.value for r in Route} - {Route.DONE.value}
    assert {"Variable": "$.route", "StringEquals": Route.INLINE.value, "Next": "ModelTurn"} in choices


def test_a_model_timeout_that_leaves_no_time_for_an_inline_call_is_refused(tmp_path):
    context = _context({"triage": "agents.triage_inline:build"})
    context["longstep"] = {**context["longstep"], "model_timeout_seconds": 120, "tool_timeout_seconds": 120}
    with pytest.raises(ConfigError, match=r"^longstep\.model_timeout_seconds: 120 leaves agent 'triage'.s inline read tools no time"):
        longstep_kit.app.build_app(REPO_ROOT, context=context, outdir=str(tmp_path))


def _list(value):
    return value if isinstance(value, list) else [value]
