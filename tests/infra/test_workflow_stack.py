"""The stack with a workflow configured: its state machine (valid ASL, every directive routed),
its function's least privilege, cdk-nag clean; and nothing of it when none is configured."""

from __future__ import annotations

import json
from typing import Any

import pytest

from longstep.workflows import log
from longstep_kit.testing.asl import all_states, state_machine_definitions
from longstep_kit.config import ConfigError, load_config

from .conftest import REPO_ROOT, load_app_module, resources_of_type
from .test_lint import _validate_asl

WORKFLOWS = {"release": "agents.release:build"}
HANDLER = "longstep_functions.workflow.lambda_handler"


@pytest.fixture(scope="module")
def workflow_app(tmp_path_factory):
    context = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]
    context["longstep"] = {**context["longstep"], "workflows": WORKFLOWS}
    return load_app_module().build_app(context=context, outdir=str(tmp_path_factory.mktemp("workflow-app")))


@pytest.fixture(scope="module")
def workflow_template(workflow_app) -> dict[str, Any]:
    (stack,) = workflow_app.synth().stacks
    return stack.template


@pytest.fixture(scope="module")
def workflow_definition(workflow_template) -> tuple[str, dict[str, Any]]:
    found = [(lid, d) for lid, d in state_machine_definitions(workflow_template).items() if lid.startswith("Workflowrelease")]
    assert len(found) == 1, sorted(state_machine_definitions(workflow_template))
    return found[0]


def test_no_workflow_resources_unless_workflows_are_configured(template):
    handlers = {f["Properties"]["Handler"] for f in resources_of_type(template, "AWS::Lambda::Function").values()}
    assert HANDLER not in handlers
    assert not [k for k in template.get("Outputs", {}) if k.startswith("WorkflowStateMachineArn")]


def test_the_workflow_state_machine_routes_every_directive(workflow_template, workflow_definition):
    _, definition = workflow_definition
    states = all_states(definition)
    assert definition["StartAt"] == "Invoke"
    assert states["Invoke"]["Next"] == "Route" and states["Invoke"]["ResultPath"] == "$.directive"
    routed = {c["StringEquals"]: c["Next"] for c in states["Route"]["Choices"]}
    assert routed == {
        log.CONTINUE: "Invoke",
        log.WAIT: "Sleep",
        log.APPROVE: "Approval",
        log.SIGNAL: "Signal",
        log.DONE: "Done",
        log.CONTINUE_AS_NEW: "HandOver",
        log.DELEGATE: "Delegate",
    }
    assert states["HandOver"]["Next"] == "HandedOver" and states["HandedOver"]["Type"] == "Succeed"
    assert states["HandOver"]["Parameters"]["state_machine_arn.$"] == "$$.StateMachine.Id"
    assert states["Route"]["Default"] == "Failed" and states["Failed"]["Type"] == "Fail"
    # Waits run nothing: a Wait state, and two task-token tasks that come back to Invoke.
    assert states["Sleep"] == {**states["Sleep"], "Type": "Wait", "SecondsPath": "$.directive.seconds", "Next": "Invoke"}
    for name, timed_out in (("Approval", "ApprovalTimedOut"), ("Signal", "SignalTimedOut")):
        task = states[name]
        assert task["Resource"].endswith(":states:::lambda:invoke.waitForTaskToken")
        assert task["Parameters"]["Payload"] == {"action": "park", "state.$": "$", "token.$": "$$.Task.Token"}
        assert task["TimeoutSecondsPath"] == "$.directive.timeout_seconds" and task["Next"] == "Invoke"
        assert task["Catch"] == [{"ErrorEquals": ["States.Timeout"], "ResultPath": "$.error", "Next": timed_out}]
        assert states[timed_out]["Next"] == "Invoke"
    # ctx.agent: the child agent run's Finish answers the token; its failure and a timeout are
    # caught into the outcome the next pass records.
    delegate = states["Delegate"]
    assert delegate["Resource"].endswith(":states:::lambda:invoke.waitForTaskToken") and delegate["Next"] == "Invoke"
    assert delegate["Parameters"]["Payload"] == {
        "action": "park",
        "state.$": "$",
        "token.$": "$$.Task.Token",
        "execution_name.$": "$$.Execution.Name",
    }
    assert delegate["ResultPath"] == "$.resumed" and delegate["TimeoutSeconds"] == 168 * 3600  # subagent_timeout_hours (default)
    assert delegate["Catch"] == [
        {"ErrorEquals": ["States.Timeout"], "ResultPath": "$.error", "Next": "AgentTimedOut"},
        {"ErrorEquals": ["SubagentFailed"], "ResultPath": "$.resumed", "Next": "Invoke"},
    ]
    assert states["AgentTimedOut"]["Next"] == "Invoke"
    # Pinned: every task calls the function's published version of this deploy.
    for name in ("Invoke", "Approval", "Signal", "Delegate", "HandOver", "Escalate"):
        # A task with payload_response_only names its function in Resource.
        target = states[name].get("Parameters", {}).get("FunctionName") or states[name]["Resource"]
        assert "CurrentVersion" in json.dumps(target), (name, target)
    (alias,) = [
        a for lid, a in resources_of_type(workflow_template, "AWS::StepFunctions::StateMachineAlias").items() if lid.startswith("Workflowrelease")
    ]
    assert alias["Properties"]["Name"] == "live"
    # What retries cannot fix waits for a human, then goes back to Invoke or ends the run.
    assert states["Invoke"]["Catch"] == [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Escalate"}]
    assert states["Escalate"]["Parameters"]["Payload"]["action"] == "escalate" and states["Escalate"]["Next"] == "Resolved"
    assert [c["Next"] for c in states["Resolved"]["Choices"]] == ["Aborted"] and states["Resolved"]["Default"] == "Invoke"
    assert workflow_template["Outputs"]["WorkflowStateMachineArnRelease"]


def test_asl_validator_accepts_the_workflow_definition(workflow_definition, tmp_path):
    logical_id, definition = workflow_definition
    path = tmp_path / f"{logical_id}.asl.json"
    path.write_text(json.dumps(definition))
    done = _validate_asl(path)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"


def test_the_workflow_function_holds_exactly_what_it_uses(workflow_template):
    ((lid, fn),) = [(k, f) for k, f in resources_of_type(workflow_template, "AWS::Lambda::Function").items() if f["Properties"]["Handler"] == HANDLER]
    variables = fn["Properties"]["Environment"]["Variables"]
    assert json.loads(variables["LONGSTEP_WORKFLOWS"]) == WORKFLOWS
    assert "LONGSTEP_TABLE_RELEASE_LEDGER" in variables
    role = fn["Properties"]["Role"]["Fn::GetAtt"][0]
    statements = [
        s
        for p in resources_of_type(workflow_template, "AWS::IAM::Policy").values()
        if {"Ref": role} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    actions = {a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert {"states:SendTaskSuccess", "states:StartExecution"} <= actions
    assert not {a for a in actions if a.startswith(("bedrock:", "s3:"))}
    # Step Functions actions on its own state machine (continue-as-new, task responses), reading
    # its own executions (the hand-over starts on the version it runs), and
    # StartExecution on the agent state machine (ctx.agent's child runs), nothing else.
    (machine,) = [k for k in resources_of_type(workflow_template, "AWS::StepFunctions::StateMachine") if k.startswith("Workflowrelease")]
    (agents,) = [k for k in resources_of_type(workflow_template, "AWS::StepFunctions::StateMachine") if k.startswith("AgentStateMachine")]
    for statement in statements:
        granted = [statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"]
        if statement["Resource"] == {"Ref": agents}:
            assert granted == ["states:StartExecution"] or granted == "states:StartExecution"
        elif granted in (["states:DescribeExecution"], "states:DescribeExecution"):  # its own executions (the version it runs)
            assert ":execution:" in json.dumps(statement["Resource"]) and machine in json.dumps(statement["Resource"])
        elif any(a.startswith("states:") for a in granted):
            assert statement["Resource"] == {"Ref": machine}
    assert any(s["Resource"] == {"Ref": agents} for s in statements)
    assert variables["LONGSTEP_AGENT_STATE_MACHINE_ARN"] == {"Fn::Join": ["", [{"Ref": agents}, ":live"]]}
    assert "triage" in json.loads(variables["LONGSTEP_AGENTS"])
    # The agent's Finish and ChildFailed answer the workflow's task token (and nothing else does).
    answering = [
        p["Properties"]
        for p in resources_of_type(workflow_template, "AWS::IAM::Policy").values()
        if any(s["Resource"] == {"Ref": machine} and "states:SendTaskFailure" in s["Action"] for s in p["Properties"]["PolicyDocument"]["Statement"])
    ]
    roles = {r["Ref"] for p in answering for r in p["Roles"]}
    assert any(r.startswith("AgentFinish") for r in roles) and any(r.startswith("AgentChildFailed") for r in roles)
    # No Scan; DeleteItem on the checkpoint table only (a failed step's claim: the step's record is
    # its lock, longstep.claims); nothing on the idempotency table.
    assert "dynamodb:Scan" not in actions and "dynamodb:DeleteItem" in actions
    deletes = [s for s in statements if "dynamodb:DeleteItem" in s["Action"]]
    assert deletes and all("Checkpoint" in json.dumps(s["Resource"]) for s in deletes)
    assert not [s for s in statements if "Idempotency" in json.dumps(s["Resource"])]


def test_cdk_nag_finds_nothing_unacknowledged(workflow_app):
    from cdk_nag import AwsSolutionsChecks, ServerlessChecks

    for pack in (AwsSolutionsChecks(), ServerlessChecks()):
        report = pack.validate_scope(workflow_app)
        findings = [f"{v.rule_name} at {[r.construct_path for r in v.violating_resources]}" for v in report.violations]
        assert findings == [], type(pack).__name__


def test_bad_workflow_registrations_are_one_line_errors():
    with pytest.raises(ConfigError, match=r"longstep\.workflows\.release"):
        load_config({"workflows": {"release": "not a reference"}})
    from longstep_kit.declarations import workflow_declarations

    with pytest.raises(ConfigError, match=r"longstep\.workflows\.release: workflow 'agents\.triage:build': build\(\) returned Agent, not a Workflow"):
        workflow_declarations(REPO_ROOT, {"release": "agents.triage:build"})


def test_the_asl_validator_is_really_run(tmp_path):
    path = tmp_path / "broken.asl.json"
    path.write_text(json.dumps({"StartAt": "Invoke", "States": {"Invoke": {"Type": "Pass", "Next": "Nowhere"}}}))
    assert _validate_asl(path).returncode != 0
