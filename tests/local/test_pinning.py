"""Deploying under a waiting run (issue 15): the run keeps the code it started with.

The stack is deployed locally, a run parks on an approval, the project is redeployed with a
renamed tool and a changed argument schema, the approval is given, and the run finishes on its
pinned versions (its next turn calls the tool that no longer exists in the new code); a run
started afterwards runs the new code.
"""

from __future__ import annotations

import json

import pytest

from longstep.code_version import code_parts, code_version
from longstep_kit.local.runner import RunOptions
from longstep_kit.local.scenario import Scenario
from longstep_kit.local.stack import LocalStack
from longstep_kit.testing.wait import wait_until
from longstep import keys
from longstep.humans.requests import pending_approvals
from longstep.store import CheckpointStore
from longstep_kit import cli
from longstep_kit.local.runner import run_scenario
from tests.fixtures.agents import triage_variants
from tests.local.conftest import Background
from tests.local.test_humans_and_waits import _approvals

NEW_CODE = "tests.fixtures.agents.triage_variants:redeployed"
EMAIL = {"to": "payments-oncall@example.com", "subject": "Checkout incident", "body": "The provider timeout caused the outage."}
TICKET = {"title": "Gateway timeout", "body": "Set the provider timeout to 5 s.", "priority": "P1"}


def _scenario(name: str, ticket_tool: str) -> Scenario:
    return Scenario.model_validate(
        {
            "name": name,
            "input": {"goal": "Tell payments and file the ticket.", "agent": "triage", "max_turns": 5},
            "turns": {
                "0": {
                    "text": "Emailing payments.",
                    "tool_calls": [{"name": "send_email", "input": EMAIL if ticket_tool == "file_ticket" else {**EMAIL, "priority": "high"}}],
                },
                "1": {"text": "Filing the ticket.", "tool_calls": [{"name": ticket_tool, "input": TICKET}]},
                "2": {"text": "Summary: payments on-call was emailed and the ticket was filed."},
            },
        }
    )


@pytest.fixture(scope="module")
def stack():
    with LocalStack() as local:
        yield local


def _store(stack) -> CheckpointStore:
    return CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))


def _versions(stack, run_id: str) -> list[str]:
    """The state machine version number each execution of the run ran."""
    sfn = stack.client("stepfunctions")
    executions = [e for e in sfn.list_executions(stateMachineArn=stack.state_machine_arn)["executions"] if e["name"].startswith(run_id)]
    return [sfn.describe_execution(executionArn=e["executionArn"])["stateMachineVersionArn"].rpartition(":")[2] for e in executions]


def test_a_waiting_run_finishes_on_its_pinned_code_and_a_new_run_uses_the_new_code(stack, capsys):
    from agents.triage import build

    old_version, new_version = code_version(code_parts(build())), code_version(code_parts(triage_variants.redeployed()))
    with stack.clock.held():  # time stands still while the team deploys
        background = Background(stack, _scenario("pinned", "file_ticket"), RunOptions(run_id="pinned", approve="external"))
        (request,) = wait_until("the run parked on its approval", lambda: pending_approvals(_approvals(stack), "pinned"))
        stack.redeploy({"longstep": {"agents": {"triage": NEW_CODE}}})
        sfn = stack.client("stepfunctions")
        alias = sfn.describe_state_machine_alias(stateMachineAliasArn=stack.alias_arn)
        assert alias["routingConfiguration"][0]["stateMachineVersionArn"].endswith(":2")
        capsys.readouterr()
        assert cli.main(["approve", request["approval_id"]]) == 0
    report = background.result()
    # The pinned code ran the approved call and the next turn's file_ticket, gone from the new code.
    assert report["status"] == "SUCCEEDED", report
    assert _versions(stack, "pinned") == ["1"]
    assert _store(stack).get("pinned", keys.RUN_RECORD)["code_version"] == old_version
    assert report["tool_calls"]["executed"] == 2  # send_email and file_ticket, both on the old code

    fresh = run_scenario(stack, _scenario("fresh", "create_ticket"), RunOptions(run_id="fresh"))
    assert fresh["status"] == "SUCCEEDED", fresh
    assert _versions(stack, "fresh") == ["2"]
    assert _store(stack).get("fresh", keys.RUN_RECORD)["code_version"] == new_version != old_version


def test_versions_lists_the_deploys_and_prune_removes_what_no_run_uses(stack, capsys):
    """After the test above: version 1 (the pinned run's, finished) and version 2 (the alias's)."""
    capsys.readouterr()
    assert cli.main(["versions", "--output", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(v["version"], v["aliases"], v["running"]) for v in listed] == [(2, ["live"], []), (1, [], [])]
    assert cli.main(["versions", "prune", "--output", "json"]) == 0
    pruned = json.loads(capsys.readouterr().out)
    assert [arn.rpartition(":")[2] for arn in pruned["state_machine_versions"]] == ["1"]
    assert pruned["function_versions"] and all(arn.endswith(":1") for arn in pruned["function_versions"])
    sfn, lam = stack.client("stepfunctions"), stack.client("lambda")
    remaining = sfn.list_state_machine_versions(stateMachineArn=stack.state_machine_arn)["stateMachineVersions"]
    assert [v["stateMachineVersionArn"].rpartition(":")[2] for v in remaining] == ["2"]
    # What version 2 calls is still there: a new run on the alias finishes.
    fresh = run_scenario(stack, _scenario("after-prune", "create_ticket"), RunOptions(run_id="after-prune"))
    assert fresh["status"] == "SUCCEEDED", fresh
    function_name = pruned["function_versions"][0].split(":function:")[1].rpartition(":")[0]
    assert [v["Version"] for v in lam.list_versions_by_function(FunctionName=function_name)["Versions"]] == ["$LATEST", "2"]
