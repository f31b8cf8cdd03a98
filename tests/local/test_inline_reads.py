"""Read tools run inside ModelTurn (``Agent.inline_read_tools``) on the local stack, IAM enforced:
triage.json with the triage agent inlining its reads (``agents.triage_inline``) is the same run
as with the agent that does not (transcript, output, effects), its read turns invoke no CallTool,
a crash inside ModelTurn after an inline call was recorded replays the record instead of running
the call again, and the agent's own ModelTurn may read its tables but write none of them.

Each tool run is counted by its idempotency key (the cached agent's read tools wrapped), so "run
again" is observed, not inferred.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections import Counter
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from longstep import clients, faults
from longstep.agents import AgentCatalog
from longstep.resources import ENV_AGENT
from longstep_kit.local import iam
from longstep_kit.local.faults import Fault, parse_fault
from longstep_kit.local.runner import RunOptions, run_scenario
from longstep_kit.local.stack import LocalStack

INLINE = {"triage": "agents.triage_inline:build"}
READ_TURNS = (0, 1, 4)  # triage.json: search_docs; read_document twice; search_docs
READS = ("search_docs", "read_document")
_names = itertools.count()
README = Path(__file__).resolve().parents[2] / "README.md"
SHIPPED = re.search(r"transcript sha256 ([0-9a-f]{64})", README.read_text()).group(1)


@pytest.fixture(scope="module")
def stack():
    with LocalStack(context={"longstep": {"agents": INLINE}}) as local:
        yield local


@pytest.fixture
def runs(monkeypatch):
    """Counts each read tool's runs by idempotency key (the agent the handlers use, built once per process)."""
    counted: Counter = Counter()
    agent = AgentCatalog(INLINE)("triage")
    for name in READS:
        item = agent.tools.tools[name]

        def counting(args, ctx, fn=item.fn):
            counted[ctx.idempotency_key] += 1
            return fn(args, ctx)

        monkeypatch.setitem(agent.tools.tools, name, dataclasses.replace(item, fn=counting))
    return counted


def _run(stack, triage, *fault_list):
    stack.reset_data()
    first = len(stack.dispatcher.invocations)
    report = run_scenario(stack, triage, RunOptions(run_id="triage", execution_name=f"inline-{next(_names)}", faults=list(fault_list)))
    return report, stack.dispatcher.invocations[first:]


@pytest.fixture(scope="module")
def clean(stack, triage):
    report, _ = _run(stack, triage)
    return report


def _same_run(report, clean):
    assert report["status"] == "SUCCEEDED", report.get("cause")
    assert report["transcript_sha256"] == clean["transcript_sha256"]
    assert report["output"] == clean["output"]
    assert report["effects"] == clean["effects"] and report["effects"]["duplicate_effects"] == 0


def test_the_run_is_the_shipped_one_and_its_read_turns_invoke_no_call_tool(stack, triage, runs):
    report, invocations = _run(stack, triage)
    assert report["status"] == "SUCCEEDED" and report["effects"]["duplicate_effects"] == 0
    # The transcript the README documents for triage.json (the agent that runs every call in CallTool).
    assert report["transcript_sha256"] == SHIPPED
    called = {inv.event.get("turn") for inv in invocations if inv.task == "call_tool"}
    assert called and not called & set(READ_TURNS)  # the turns with a write still go to CallTool
    assert sorted(runs.values()) == [1, 1, 1, 1]  # four read calls, each run once, in ModelTurn
    # The run's summary counts the calls ModelTurn ran as tool calls too.
    assert report["tool_calls"] == {"executed": sum(len(turn.tool_calls) for turn in triage.turns.values()), "replayed": 0}
    assert {inv.function for inv in invocations if inv.task == "model_turn"} == {_function(stack, "triage")["FunctionName"]}


@pytest.mark.parametrize(
    "spec",
    [
        f"{faults.AFTER_TOOL}@1",  # call 0 recorded, call 1 not run yet
        f"{faults.AFTER_TOOL}@0",
        f"{faults.BEFORE_TOOL}@1",
        "lost_ack.UpdateItem@2",
        "lost_ack.PutItem@6",
    ],
)
def test_a_crash_inside_model_turn_replays_an_inline_call_it_recorded(stack, triage, clean, runs, spec):
    report, _ = _run(stack, triage, parse_fault(spec))
    _same_run(report, clean)
    assert [f["point"] for f in report["faults_injected"]] == [spec.partition("@")[0]]  # it fired, once
    assert sorted(runs.values()) == [1, 1, 1, 1]  # nothing recorded was run again


def test_a_crash_between_an_inline_reads_effect_and_its_record_runs_that_read_again(stack, triage, clean, runs):
    # A read may run again (docs/design.md §3): its result was never recorded.
    report, _ = _run(stack, triage, Fault(faults.AFTER_EFFECT, 1))
    _same_run(report, clean)
    assert sorted(runs.values()) == [1, 1, 1, 2]


def _function(stack, agent: str | None) -> dict:
    functions = stack.client("lambda").list_functions()["Functions"]
    (fn,) = [
        f
        for f in functions
        if f["Handler"] == "longstep_functions.model_turn.lambda_handler" and f["Environment"]["Variables"].get(ENV_AGENT) == agent
    ]
    return fn


def test_the_agents_model_turn_reads_its_tables_and_writes_none(stack):
    variables = _function(stack, "triage")["Environment"]["Variables"]
    documents, tickets = variables["LONGSTEP_TABLE_DOCUMENTS"], variables["LONGSTEP_TABLE_TICKETS"]
    ddb = clients.client("dynamodb")
    with iam.acting_as(_function(stack, "triage")["Role"]):
        ddb.get_item(TableName=documents, Key={"doc_id": {"S": "none"}})  # granted: what its read tools do
        ddb.get_item(TableName=tickets, Key={"ticket_id": {"S": "none"}})
        for write in (
            lambda: ddb.put_item(TableName=tickets, Item={"ticket_id": {"S": "TCK-X"}}),
            lambda: ddb.delete_item(TableName=documents, Key={"doc_id": {"S": "none"}}),
        ):
            with pytest.raises(ClientError) as caught:
                write()
            assert caught.value.response["Error"]["Code"] == "AccessDeniedException"
    with iam.acting_as(_function(stack, None)["Role"]):  # the shared ModelTurn: nothing of the agent's
        with pytest.raises(ClientError) as caught:
            ddb.get_item(TableName=documents, Key={"doc_id": {"S": "none"}})
        assert caught.value.response["Error"]["Code"] == "AccessDeniedException"
