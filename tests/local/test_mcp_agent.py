"""docs/mcp.md's depot agent (examples/mcp_agent) on the local stack, its tools from a real MCP
server (the SDK's, streamable HTTP on 127.0.0.1): the clean run, and its crash campaign (every
fault point of every turn, random faults at several seeds, restarts, crashes while the report's
task waits), each ending with the clean transcript and 0 duplicates counted from the server's own
ledger."""

from __future__ import annotations

import itertools

import pytest

from examples.mcp_agent import agent as depot_agent
from longstep import faults, keys
from longstep_kit.local.faults import Fault, random_faults
from longstep_kit.local.runner import RunOptions, run_scenario
from longstep_kit.local.stack import LocalStack
from longstep_kit.testing import load_scenario
from tests.local.conftest import SCENARIOS
from tests.conftest import campaign

TURNS = 4  # mcp.json: turns 0..3, the last one answers
# Every fault point, each where it bites hardest, one of each kind per run (each fault fires once):
# the tool points on the shipment's turn (1: at most once, approved) and on the report's (2: its
# task's first check, then CallTool), the model points on the report's turn. The other turns are
# the random plans' and the restarts'.
PLANS = [
    [Fault(faults.BEFORE_TOOL, 1), Fault(faults.BEFORE_TOOL, 2), Fault(faults.BEFORE_MODEL, 2)],
    [Fault(faults.AFTER_EFFECT, 1), Fault(faults.AFTER_EFFECT, 2), Fault(faults.AFTER_MODEL, 2)],
    [Fault(faults.AFTER_TOOL, 1), Fault(faults.AFTER_TOOL, 2), Fault(faults.AFTER_RECORD, 2)],
]
_names = itertools.count()


@pytest.fixture(scope="module")
def stack():
    context = {"longstep": {"agents": {"triage": "agents.triage:build", "depot": "examples.mcp_agent.agent:build"}}}
    with LocalStack(context=context) as local:
        yield local


@pytest.fixture(scope="module")
def scenario():
    return load_scenario(SCENARIOS / "mcp.json")


def _run(stack, scenario, run_id="mcp", **options):
    stack.reset_data()
    depot_agent.depot().depot.reset()
    return run_scenario(stack, scenario, RunOptions(run_id=run_id, execution_name=f"mcp-{next(_names)}", **options))


@pytest.fixture(scope="module")
def clean(stack, scenario):
    report = _run(stack, scenario)
    assert report["status"] == "SUCCEEDED", report.get("cause")
    return report


def _assert_same_run(report, clean):
    assert report["status"] == "SUCCEEDED", report.get("cause")
    assert report["output"] == clean["output"]
    assert report["transcript_sha256"] == clean["transcript_sha256"]
    assert report["effects"] == clean["effects"]


def _server_effects(run_id="mcp"):
    """The depot's own books for the run: effects per tool, and any key that acted twice."""
    ledger = [e for e in depot_agent.depot().depot.ledger if str(e["key"]).startswith(f"{run_id}:")]
    by_tool: dict[str, list[str]] = {}
    for entry in ledger:
        by_tool.setdefault(entry["tool"], []).append(entry["key"])
    return {tool: len(found) for tool, found in by_tool.items()}, {k for found in by_tool.values() for k in found if found.count(k) > 1}


def test_the_clean_run_uses_each_kind_of_mcp_tool_once(stack, clean):
    assert clean["effects"]["by_tool"] == {"build_report": 1, "reserve_part": 1, "ship_order": 1}
    assert clean["effects"]["duplicate_effects"] == 0
    counts, twice = _server_effects()
    assert counts == {"build_report": 1, "reserve_part": 1, "ship_order": 1} and not twice
    assert [(a["tool"], a["status"]) for a in clean["approvals"]] == [("ship_order", "approved")]
    assert "Dock 4" in clean["output"]
    assert depot_agent.depot().depot.refused == 0  # every request carried the secret's token


def test_the_depots_secret_is_granted_to_init_and_the_agents_tool_functions_only(stack, clean):
    import json

    granted = set()
    for resource in stack.deployed_template["Resources"].values():
        if resource["Type"] == "AWS::IAM::Policy" and "longstep/examples/depot-token" in json.dumps(resource["Properties"]["PolicyDocument"]):
            granted |= {role["Ref"] if isinstance(role, dict) else role for role in resource["Properties"]["Roles"]}
    # CallToolEval: an eval run's read tools run live (docs/evals.md), an MCP server's included.
    parts = ("InitRun", "CallTooldepot", "CallToolEvaldepot", "CheckConditiondepot")
    assert len(granted) == 4 and all(any(part in name for part in parts) for name in granted), granted


def test_the_plans_hold_every_fault_point():
    assert {f.point for plan in PLANS for f in plan} == set(faults.POINTS)


# The suite crashes at the effect plan (the one whose probe must answer); `make campaign` runs all three.
@pytest.mark.parametrize("plan", campaign(PLANS, lambda plan: plan is PLANS[1]), ids=lambda plan: "+".join(f"{f.point}@{f.turn}" for f in plan))
def test_a_crash_at_any_point_costs_one_step(stack, scenario, clean, plan):
    report = _run(stack, scenario, faults=plan)
    _assert_same_run(report, clean)
    assert sorted((f["point"], f["turn"]) for f in report["faults_injected"]) == sorted((f.point, f.turn) for f in plan)  # each fired, once
    counts, twice = _server_effects()
    assert counts == clean["effects"]["by_tool"] and not twice
    assert report["escalations"] == []  # ship_order's probe answers for an interrupted shipment


@pytest.mark.parametrize("seed", campaign([7, 23], (7).__eq__))
def test_random_faults(stack, scenario, clean, seed):
    report = _run(stack, scenario, faults=random_faults("random:6", seed, TURNS))
    _assert_same_run(report, clean)
    assert report["faults_injected"]
    assert not _server_effects()[1]


@pytest.mark.parametrize("turn", campaign([2, 3], (3).__eq__))
def test_restart_at_a_turn(stack, scenario, clean, turn):
    report = _run(stack, scenario, restart_at=turn)
    _assert_same_run(report, clean)
    assert report["executions"] == 2
    assert not _server_effects()[1]


def test_crashes_while_the_task_waits_resume_the_same_task(stack, scenario, clean):
    # before_tool@2 and after_effect@2 strike inside the report's first check: before the task
    # exists, and after the depot made it but before its id was recorded.
    report = _run(stack, scenario, faults=[Fault(faults.AFTER_EFFECT, 2), Fault(faults.MCP_TASK_POLLED, 2)])
    _assert_same_run(report, clean)
    assert [f["point"] for f in report["faults_injected"]] == [faults.AFTER_EFFECT, faults.MCP_TASK_POLLED]
    counts, twice = _server_effects()
    assert counts["build_report"] == 1 and not twice  # one task, however often the check ran
    assert len(depot_agent.depot().depot.tasks) == 1


def test_the_task_is_polled_in_the_condition_loop_with_no_lambda_between_polls(stack, scenario, clean):
    first = len(stack.dispatcher.invocations)
    report = _run(stack, scenario)
    _assert_same_run(report, clean)
    tasks = [i.task for i in stack.dispatcher.invocations[first:]]
    checks = [n for n, task in enumerate(tasks) if task == "check_condition"]
    # The depot completes a task on its third tasks/get: one CheckCondition made the task and three
    # polled it, one after the other: between them only WaitBackoff (a Wait state) ran, no Lambda.
    assert len(checks) == 4
    assert tasks[checks[0] : checks[-1] + 1] == ["check_condition"] * 4
    assert tasks[checks[-1] + 1] == "call_tool"  # which records the task's result as the call's step
    # The catalog was recorded with the run, and the task with its call.
    table, name = stack.client("dynamodb"), stack.outputs["CheckpointTableName"]
    run = table.get_item(TableName=name, Key={"pk": {"S": "mcp"}, "sk": {"S": keys.RUN_RECORD}}, ConsistentRead=True)["Item"]
    assert "build_report" in run["mcp_catalog"]["S"] and '"readOnlyHint": true' in run["mcp_catalog"]["S"]
    task = table.get_item(TableName=name, Key={"pk": {"S": "mcp"}, "sk": {"S": keys.mcp_task_key(2, 0)}}, ConsistentRead=True)["Item"]
    assert task["task_id"]["S"] in depot_agent.depot().depot.tasks


def test_stopping_the_run_while_its_task_waits_cancels_the_task(stack, scenario, clean):
    from longstep_kit.client import Client
    from longstep_kit.testing import wait_until
    from tests.local.conftest import Background

    client = Client(stack.client("stepfunctions"), stack.client("dynamodb"), stack.state_machine_arn, stack.outputs["CheckpointTableName"])
    depot = depot_agent.depot().depot
    stack.reset_data()
    depot.reset()
    depot.polls_to_complete = 10**6  # the report never completes by itself
    with stack.clock.held():  # the first check makes the task; the backoff after it waits for the release
        background = Background(stack, scenario, RunOptions(run_id="mcp-stop", execution_name="mcp-stop"))
        wait_until("the report's task", lambda: depot.tasks, timeout=30)
        assert client.stop("mcp-stop", "not needed any more")
    report = background.result()
    (task,) = depot.tasks.values()
    assert task["status"] == "cancelled"
    assert [e["tool"] for e in depot.ledger if e["tool"] in ("build_report", "cancel_report")] == ["build_report", "cancel_report"]
    assert report["status"] == "SUCCEEDED"
    happened = [e["type"] for e in client.events("mcp-stop")]
    assert "run.stopped" in happened and "mcp.task_started" in happened
    assert report["turns"] == 3  # the report's turn was the last: the stopped run made no other


def test_a_task_result_too_large_for_the_state_is_offloaded_to_s3(stack, scenario, tmp_path):
    import json

    raw = json.loads((SCENARIOS / "mcp.json").read_text())
    raw["turns"]["2"]["tool_calls"][0]["input"]["region"] = "all"
    raw["expect"] = {"status": "SUCCEEDED"}
    (tmp_path / "mcp_all.json").write_text(json.dumps(raw))
    report = _run(stack, load_scenario(tmp_path / "mcp_all.json"), run_id="mcp-all")
    assert report["status"] == "SUCCEEDED", report.get("cause")
    from longstep.store import CheckpointStore

    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
    (step,) = [s for s in store.steps("mcp-all") if s.name == "build_report"]
    offloaded = step.result["content"]["offloaded"]
    assert offloaded["bytes"] > 256 * 1024  # more than a Step Functions state may carry
    from longstep.artifacts import ArtifactStore

    text = json.loads(ArtifactStore(stack.outputs["ArtifactBucketName"], stack.client("s3")).get(offloaded["uri"]))
    assert text.startswith("P-000000: 12 in stock") and text.count("\n") == 11_999


def test_a_catalog_changed_under_a_live_run_is_reported_and_the_run_keeps_its_own(stack, clean, tmp_path):
    import json

    from longstep.store import CheckpointStore
    from longstep_kit.client import Client

    raw = json.loads((SCENARIOS / "mcp.json").read_text())
    raw["input"]["turns_per_execution"] = 1  # every turn in a new execution: each Init compares the catalog
    (tmp_path / "mcp_generations.json").write_text(json.dumps(raw))
    process = depot_agent.depot()
    original = process.server._tool_manager.get_tool("lookup_part")  # put back at the end
    changed = []

    def lookup_part_v2(sku: str) -> dict:
        return {"sku": sku}

    def change_the_catalog(invocation):  # after turn 0's tools: the depot is redeployed with a new lookup_part
        if invocation.task == "model_turn" and (invocation.event or {}).get("next_turn") == 1 and not changed:
            process.server.remove_tool("lookup_part")
            process.server.add_tool(lookup_part_v2, name="lookup_part", description="Look a part up (v2).")
            changed.append(True)

    stack.dispatcher.before_invoke.append(change_the_catalog)
    try:
        report = _run(stack, load_scenario(tmp_path / "mcp_generations.json"))
    finally:
        stack.dispatcher.before_invoke.remove(change_the_catalog)
        process.server.remove_tool("lookup_part")
        process.server.add_tool(original.fn, name="lookup_part", description=original.description, annotations=original.annotations)
    assert report["status"] == "SUCCEEDED" and report["executions"] >= 2 and changed
    client = Client(stack.client("stepfunctions"), stack.client("dynamodb"), stack.state_machine_arn, stack.outputs["CheckpointTableName"])
    reported = [e for e in client.events("mcp") if e["type"] == "mcp.catalog_changed"]
    assert reported and reported[0]["changes"] == ["depot/lookup_part: its description, schema or annotations changed"]
    assert report["transcript_sha256"] == clean["transcript_sha256"]
    # The run keeps offering the model the catalog it started with.
    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
    assert "Stock and price of a part" in store.get("mcp", keys.RUN_RECORD)["mcp_catalog"]


def test_no_mcp_traffic_or_credential_in_the_logs(stack, scenario, clean, monkeypatch, caplog, capfd):
    import logging

    from longstep import settings

    monkeypatch.setenv(settings.ENV_LAMBDA_FUNCTION_NAME, "longstep-local")  # the handlers print as in Lambda
    caplog.set_level(logging.INFO)  # as the functions log (botocore's DEBUG lines echo every request's parameters)
    report = _run(stack, scenario)
    _assert_same_run(report, clean)
    out, err = capfd.readouterr()
    logged = out + err + caplog.text
    assert '"run_id":"mcp"' in logged.replace(" ", "")  # the handlers' lines were captured
    token = depot_agent.depot().depot.token
    assert token and token not in logged
    assert "HTTP Request" not in logged and depot_agent.depot().url not in logged  # no request line of the MCP client
