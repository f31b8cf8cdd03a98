"""The agent loop's state machine, read from the synthesized template (``longstep_kit.testing.asl``).

Golden copy: ``golden/state_machine.asl.json`` holds the resolved definition (ARNs replaced by
stable placeholders). After an intended change to the loop, regenerate it and review the diff:

    LONGSTEP_UPDATE_GOLDEN=1 .venv/bin/pytest -q tests/infra/test_state_machine.py -k golden

With ``LONGSTEP_UPDATE_GOLDEN=1`` the golden test rewrites the file (``indent=2``,
``sort_keys=True``, trailing newline) instead of comparing against it.
"""

from __future__ import annotations

import difflib
import json
import re
import os
import typing

import pytest

from longstep_kit.testing.asl import PLACEHOLDER_ARN
from longstep_kit.config import DeploymentConfig
from longstep.errors import lock_wait_error_names, permanent_error_names, retryable_error_names, start_rejection_error_names
from longstep.contract.call import CallItem
from longstep.contract.cursor import Cursor, Route

from longstep.subagents import CHILD_FAILED_ERROR

from .conftest import GOLDEN_DIR, resources_of_type

GOLDEN_FILE = GOLDEN_DIR / "state_machine.asl.json"
UPDATE_GOLDEN = os.environ.get("LONGSTEP_UPDATE_GOLDEN") == "1"

EXPECTED_STATES = {
    "Init",
    "ModelTurn",
    "Route",
    "ToolCalls",
    "Dispatch",
    "RequestApproval",
    "ApprovalTimedOut",
    "CallTool",
    "CallOneTool",
    "WaitTimer",
    "WaitForEvent",
    "EventTimedOut",
    "EscalateModelTurn",
    "EscalateCallTool",
    "EscalateCallOneTool",
    "Finish",
    "Done",
    "ContinueAsNew",
    "HandedOver",
    "CheckCondition",
    "ConditionChecked",
    "ConditionSettled",
    "WaitBackoff",
    "BindAgent",
    "BindAgent-triage",
    "DelegateToSubagent",
    "SubagentTimedOut",
    "ModelTurnTellParent",
    "CallToolTellParent",
    "ModelTurnTellParentUnanswered",
    "CallToolTellParentUnanswered",
    "CallOneToolTellParent",
    "CallOneToolTellParentUnanswered",
    "Pause",
}
# Tasks that run the agent's own code: the function is the run's agent's, named by a workflow variable.
PER_AGENT_TASKS = {"CallTool": "call_tool_function", "CallOneTool": "call_tool_function", "CheckCondition": "check_condition_function"}
# Task state -> the handler of the Lambda function it must invoke.
TASK_HANDLERS = {
    "Init": "longstep_functions.init_run.lambda_handler",
    "ModelTurn": "longstep_functions.model_turn.lambda_handler",
    "CallTool": "longstep_functions.call_tool.lambda_handler",
    "CallOneTool": "longstep_functions.call_tool.lambda_handler",
    "RequestApproval": "longstep_functions.request_approval.lambda_handler",
    "WaitForEvent": "longstep_functions.wait_for_event.lambda_handler",
    "EscalateModelTurn": "longstep_functions.escalate.lambda_handler",
    "EscalateCallTool": "longstep_functions.escalate.lambda_handler",
    "EscalateCallOneTool": "longstep_functions.escalate.lambda_handler",
    "ContinueAsNew": "longstep_functions.continue_as_new.lambda_handler",
    "CheckCondition": "longstep_functions.check_condition.lambda_handler",
    "Finish": "longstep_functions.finish.lambda_handler",
    "DelegateToSubagent": "longstep_functions.delegate_to_subagent.lambda_handler",
    "ModelTurnTellParent": "longstep_functions.child_failed.lambda_handler",
    "CallToolTellParent": "longstep_functions.child_failed.lambda_handler",
    "ModelTurnTellParentUnanswered": "longstep_functions.child_failed.lambda_handler",
    "CallToolTellParentUnanswered": "longstep_functions.child_failed.lambda_handler",
    "CallOneToolTellParent": "longstep_functions.child_failed.lambda_handler",
    "CallOneToolTellParentUnanswered": "longstep_functions.child_failed.lambda_handler",
    "Pause": "longstep_functions.pause.lambda_handler",
}
# The steps escalated since issue 25 (a permanent failure there once failed the execution).
CAUGHT_STEPS = ("Init", "Finish", "ContinueAsNew", "RequestApproval", "WaitForEvent")
for _step in CAUGHT_STEPS:
    TASK_HANDLERS[f"Escalate{_step}"] = "longstep_functions.escalate.lambda_handler"
    TASK_HANDLERS[f"{_step}TellParent"] = "longstep_functions.child_failed.lambda_handler"
    TASK_HANDLERS[f"{_step}TellParentUnanswered"] = "longstep_functions.child_failed.lambda_handler"


def _tasks(states):
    tasks = {name: s for name, s in states.items() if s["Type"] == "Task"}
    assert set(tasks) == set(TASK_HANDLERS), sorted(tasks)
    return tasks


def _field(path: str) -> str:
    """``$.name`` -> ``name`` (a top-level field reference)."""
    assert path.startswith("$.") and "." not in path[2:], path
    return path[2:]


# A function version's logical id ends with a hash of the function's code (CDK's currentVersion):
# the golden copy tracks the definition's shape, not the code, so the hash is written as <code>.
CODE_HASH = re.compile(r"(CurrentVersion[0-9A-F]{8})[0-9a-f]{32}")


def serialize(definition) -> str:
    return CODE_HASH.sub(r"\1<code>", json.dumps(definition, indent=2, sort_keys=True)) + "\n"


def test_expected_states_exist(definition, states):
    assert definition["StartAt"] == "BindAgent"
    assert EXPECTED_STATES <= set(states), sorted(EXPECTED_STATES - set(states))


def test_bind_agent_stores_the_agents_functions_then_inits(states):
    bind = states["BindAgent"]
    assert bind["Type"] == "Choice" and bind["Default"] == "Init"
    # A missing agent must not reach a StringEquals rule (a runtime error): Init rejects it.
    assert bind["Choices"][0] == {"Not": {"Variable": "$.agent", "IsPresent": True}, "Next": "Init"}
    # An eval run (docs/evals.md) binds the agent's CallToolEval, whose role holds only its reads.
    evaluating = {"And": [{"Variable": "$.eval", "IsPresent": True}, {"Variable": "$.agent", "StringEquals": "triage"}], "Next": "BindEval-triage"}
    assert bind["Choices"][1:] == [evaluating, {"Variable": "$.agent", "StringEquals": "triage", "Next": "BindAgent-triage"}]
    assigned, evaluated = states["BindAgent-triage"], states["BindEval-triage"]
    assert assigned["Next"] == evaluated["Next"] == "Init"
    assert set(assigned["Assign"]) == set(evaluated["Assign"]) == set(PER_AGENT_TASKS.values())
    variable = PER_AGENT_TASKS["CallTool"]
    assert "CallToolEvaltriage" in evaluated["Assign"][variable] and "CallToolEval" not in assigned["Assign"][variable]


def test_the_loop_is_wired_as_designed(states):
    assert states["Init"]["Next"] == "ModelTurn"
    assert states["ModelTurn"]["Next"] == "Route"
    route = states["Route"]
    assert route["Type"] == "Choice"
    assert route["Choices"] == [
        {"Variable": "$.route", "StringEquals": "tools", "Next": "ToolCalls"},
        {"Variable": "$.route", "StringEquals": "tool", "Next": "CallOneTool"},
        {"Variable": "$.route", "StringEquals": "correct", "Next": "ModelTurn"},
        {"Variable": "$.route", "StringEquals": "continue", "Next": "ContinueAsNew"},
        {"Variable": "$.route", "StringEquals": "pause", "Next": "Pause"},
    ]
    # A turn's one call that waits for nothing: CallOneTool, then the next ModelTurn, whose input is
    # the cursor alone (no ``call``: a failing ModelTurn escalates as a model turn).
    one = states["CallOneTool"]
    assert one["Next"] == "ModelTurn" and one["Parameters"]["Payload.$"] == "$"
    assert one["ResultSelector"] == {
        "run_id.$": "$.Payload.run_id",
        "next_turn.$": "$.Payload.next_turn",
        "resolution.$": "$.Payload.resolution",
        "generation.$": "$.Payload.generation",
        "generation_start.$": "$.Payload.generation_start",
    }
    assert "OutputPath" not in one and "ResultPath" not in one
    assert states["ContinueAsNew"]["Next"] == "HandedOver" and states["HandedOver"]["Type"] == "Succeed"
    # A paused run parks on a task token, keeps its cursor, and asks ModelTurn again when resumed.
    pause = states["Pause"]
    assert pause["Resource"].endswith(":states:::lambda:invoke.waitForTaskToken") and pause["ResultPath"] is None
    assert pause["Next"] == "ModelTurn" and "TimeoutSeconds" not in pause
    assert route["Default"] == "Finish"
    assert states["ToolCalls"]["Next"] == "ModelTurn"
    assert states["Finish"]["Next"] == "Done"
    assert states["Done"]["Type"] == "Succeed"
    dispatch = states["Dispatch"]
    assert dispatch["Type"] == "Choice"
    assert dispatch["Choices"] == [
        {"Variable": "$.approval", "BooleanEquals": True, "Next": "RequestApproval"},
        {"Variable": "$.wait", "StringEquals": "timer", "Next": "WaitTimer"},
        {"Variable": "$.wait", "StringEquals": "event", "Next": "WaitForEvent"},
        {"Variable": "$.wait", "StringEquals": "condition", "Next": "CheckCondition"},
        {"Variable": "$.wait", "StringEquals": "subagent", "Next": "DelegateToSubagent"},
    ]
    # a condition: check, then either CallTool (met or timed out) or a backoff Wait and check again
    assert states["CheckCondition"]["Next"] == "ConditionChecked"
    # The integration's response wraps the check in Payload: unwrapped in place, the item kept.
    assert states["ConditionChecked"] == {
        "Type": "Pass",
        "InputPath": "$.check.Payload",
        "ResultPath": "$.check",
        "Next": "ConditionSettled",
    }
    settled = states["ConditionSettled"]
    assert settled["Choices"] == [
        {"Variable": "$.check.done", "BooleanEquals": True, "Next": "CallTool"},
        {"Variable": "$.check.handover", "BooleanEquals": True, "Next": "ConditionHandover"},
    ]
    # A wait whose execution spent its checks fails its iteration; the Map hands the run over.
    assert states["ConditionHandover"] == {**states["ConditionHandover"], "Type": "Fail", "Error": "ConditionWaitHandover"}
    assert {"ErrorEquals": ["ConditionWaitHandover"], "ResultPath": "$.handover", "Next": "ContinueAsNew"} in states["ToolCalls"]["Catch"]
    assert settled["Default"] == "WaitBackoff"
    assert states["WaitBackoff"] == {**states["WaitBackoff"], "SecondsPath": "$.check.next_wait", "Next": "CheckCondition"}
    assert dispatch["Default"] == "CallTool"
    for waiting in ("RequestApproval", "ApprovalTimedOut", "WaitTimer", "WaitForEvent", "EventTimedOut"):
        assert states[waiting]["Next"] == "CallTool", waiting
    assert states["WaitTimer"]["TimestampPath"] == "$.wait_until"
    assert states["CallTool"].get("End") is True
    assert states["CallTool"]["OutputPath"] == "$.Payload"  # the Map item's result is the handler's return
    # What retries cannot fix is parked for a human, then retried or aborted.
    for task in ("ModelTurn", "CallTool", *CAUGHT_STEPS):
        catch = states[task]["Catch"][-1]  # after a step's own catches (a wait's timeout, Init's refusals)
        assert catch == {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": f"Escalate{task}"}
        assert states[f"Escalate{task}"]["Parameters"]["Payload"]["step"] == task  # the record names the step
        assert states[f"Escalate{task}"]["Next"] == f"{task}Resolved"
        resolved = states[f"{task}Resolved"]
        assert resolved["Default"] == task
        assert resolved["Choices"][0]["StringEquals"] == "abort"
        # an aborted run tells its parent's call first (a child run; a top-level run: a no-op)
        tell = states[resolved["Choices"][0]["Next"]]
        assert resolved["Choices"][0]["Next"] == f"{task}TellParent" and states[tell["Next"]]["Type"] == "Fail"
        assert tell["Catch"] == [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": tell["Next"]}]
        # Nobody answered in time: a defined failure of its own (docs/failures.md), not States.Timeout.
        # A child run tells its parent's call first, as when aborted (the parent need not wait for its own timeout).
        (timed_out,) = states[f"Escalate{task}"]["Catch"]
        assert timed_out["ErrorEquals"] == ["States.Timeout"] and timed_out["Next"] == f"{task}TellParentUnanswered"
        tell_unanswered = states[timed_out["Next"]]
        assert tell_unanswered["Catch"][0]["Next"] == tell_unanswered["Next"]
        assert states[tell_unanswered["Next"]] == {**states[tell_unanswered["Next"]], "Type": "Fail", "Error": "EscalationTimedOut"}
    # A wait's timeout is the call's result, caught before the escalation.
    assert states["RequestApproval"]["Catch"][0] == {"ErrorEquals": ["States.Timeout"], "ResultPath": "$.error", "Next": "ApprovalTimedOut"}
    assert states["WaitForEvent"]["Catch"][0] == {"ErrorEquals": ["States.Timeout"], "ResultPath": "$.error", "Next": "EventTimedOut"}
    # A start input Init refuses fails the run at once with Init's error, never escalated.
    refused = states["Init"]["Catch"][0]
    assert refused["ErrorEquals"] == start_rejection_error_names() and refused["Next"] == "InitRejected"
    assert {"InvalidInputError", "UnknownAgentError", "RunConflictError"} <= set(refused["ErrorEquals"])
    assert "ModelAccessError" not in refused["ErrorEquals"]  # a permanent error of the deployment escalates
    assert states["InitRejected"] == {**states["InitRejected"], "Type": "Fail", "ErrorPath": "$.error.Error", "CausePath": "$.error.Cause"}
    # A condition check that keeps failing ends the wait with an error the model is shown.
    (check_catch,) = states["CheckCondition"]["Catch"]
    assert check_catch == {"ErrorEquals": ["States.ALL"], "ResultPath": "$.check_error", "Next": "ConditionCheckFailed"}
    failed = states["ConditionCheckFailed"]
    assert failed["ResultPath"] == "$.check" and failed["Next"] == "CallTool"
    assert failed["Parameters"]["done"] is True and failed["Parameters"]["met"] is False
    assert "$.check_error.Error" in failed["Parameters"]["error.$"]


def test_every_task_retries_the_lambda_service_errors_aws_documents(states):
    # https://docs.aws.amazon.com/step-functions/latest/dg/bp-lambda-serviceexception.html
    documented = {
        "Lambda.Unknown",
        "Lambda.ClientExecutionTimeoutException",
        "Lambda.ServiceException",
        "Lambda.AWSLambdaException",
        "Lambda.SdkClientException",
        "Lambda.TooManyRequestsException",
    }
    for name, task in _tasks(states).items():
        retried = {error for retrier in task.get("Retry", []) for error in retrier["ErrorEquals"]}
        assert documented <= retried, f"{name} does not retry {sorted(documented - retried)}"


def test_a_delegated_call_waits_on_a_task_token_and_comes_back_to_call_tool(states):
    delegate = states["DelegateToSubagent"]
    assert delegate["Resource"].endswith("lambda:invoke.waitForTaskToken")
    assert delegate["Parameters"]["Payload"] == {
        "item.$": "$",
        "token.$": "$$.Task.Token",
        "state_machine_arn.$": "$$.StateMachine.Id",
        "execution_name.$": "$$.Execution.Name",
    }
    assert delegate["TimeoutSeconds"] == DeploymentConfig().subagent_timeout_hours * 3600
    assert delegate["Next"] == "CallTool" and _field(delegate["ResultPath"]) in CallItem.model_fields
    # a child's failure (SendTaskFailure) lands where CallTool reads the child's answer; a timeout is told too
    assert delegate["Catch"] == [
        {"ErrorEquals": ["States.Timeout"], "ResultPath": "$.error", "Next": "SubagentTimedOut"},
        {"ErrorEquals": [CHILD_FAILED_ERROR], "ResultPath": delegate["ResultPath"], "Next": "CallTool"},
    ]
    assert CHILD_FAILED_ERROR not in {name for r in delegate["Retry"] for name in r["ErrorEquals"]}
    assert states["SubagentTimedOut"] == {**states["SubagentTimedOut"], "ResultPath": "$.child", "Next": "CallTool"}


def test_every_task_retries_exactly_the_retryable_errors(states):
    expected = retryable_error_names()
    for name, task in _tasks(states).items():
        retriers = task.get("Retry", [])
        assert len(retriers) == 2, f"{name}: {retriers}"
        lock_wait, retrier = retriers
        assert lock_wait["ErrorEquals"] == lock_wait_error_names(), name
        assert lock_wait["JitterStrategy"] == "FULL", name
        assert retrier["ErrorEquals"] == expected, name
        assert retrier.get("JitterStrategy") == "FULL", name
        assert retrier.get("BackoffRate", 1) > 1, name
        assert retrier.get("MaxDelaySeconds", 0) >= retrier.get("IntervalSeconds", 1), name
        assert retrier.get("MaxAttempts", 3) >= 1, name


# The retry budget of each task's step kind (longstep_kit.retry.RetryPolicies); the rest: bookkeeping.
STEP_KIND = {"ModelTurn": "model", "CallTool": "tool", "CallOneTool": "tool"}


def test_each_task_retries_as_its_step_kinds_policy_renders_it(template, states):
    functions = resources_of_type(template, "AWS::Lambda::Function")
    timeout_of = {  # the tasks call their functions' versions
        PLACEHOLDER_ARN.format(logical_id=lid): functions[version["Properties"]["FunctionName"]["Ref"]]["Properties"]["Timeout"]
        for lid, version in resources_of_type(template, "AWS::Lambda::Version").items()
    }
    policies = DeploymentConfig().retry
    # The per-agent functions are named at run time (FunctionName.$): their timeouts are the config's.
    dynamic = {"CallTool": DeploymentConfig().tool_timeout_seconds, "CallOneTool": DeploymentConfig().tool_timeout_seconds, "CheckCondition": 30}
    for name, task in _tasks(states).items():
        params = task.get("Parameters", {})
        policy = getattr(policies, STEP_KIND.get(name, "bookkeeping"))
        if "FunctionName.$" in params:
            timeout = dynamic[name]
        else:
            timeout = timeout_of[params["FunctionName"] if "FunctionName" in params else task["Resource"]]
        assert task["Retry"] == policy.retriers(timeout), name


def test_no_retry_names_a_permanent_error(states):
    permanent = set(permanent_error_names())
    assert permanent and not permanent & set(retryable_error_names())
    for name, state in states.items():
        for retrier in state.get("Retry", []):
            assert not permanent & set(retrier["ErrorEquals"]), f"{name} retries {permanent & set(retrier['ErrorEquals'])}"
            # A catch-all would retry permanent errors too.
            assert "States.ALL" not in retrier["ErrorEquals"], name


def test_tasks_invoke_their_functions(template, states):
    functions = resources_of_type(template, "AWS::Lambda::Function")
    # Every task calls the version of its function this deploy published (pinning), never $LATEST.
    handler_of = {
        PLACEHOLDER_ARN.format(logical_id=lid): functions[version["Properties"]["FunctionName"]["Ref"]]["Properties"]["Handler"]
        for lid, version in resources_of_type(template, "AWS::Lambda::Version").items()
    }
    for name, task in _tasks(states).items():
        if name in PER_AGENT_TASKS:
            variable = PER_AGENT_TASKS[name]
            assert task["Resource"] == "arn:aws:states:::lambda:invoke", name
            # CheckCondition also passes the execution's name: its checks are counted per execution.
            payload = {"Payload": {"item.$": "$", "execution.$": "$$.Execution.Name"}} if name == "CheckCondition" else {"Payload.$": "$"}
            assert task["Parameters"] == {"FunctionName.$": f"${variable}", **payload}, name
            target = states["BindAgent-triage"]["Assign"][variable]
        elif task["Resource"].startswith("arn:aws:states:::lambda:invoke"):
            target = task["Parameters"]["FunctionName"]
        else:
            target = task["Resource"]
        assert handler_of.get(target) == TASK_HANDLERS[name], f"{name} invokes {target}"


def test_request_approval_waits_for_a_task_token(states):
    approval = states["RequestApproval"]
    assert approval["Resource"].endswith("lambda:invoke.waitForTaskToken")
    assert approval["TimeoutSeconds"] == DeploymentConfig().approval_timeout_hours * 3600
    payload = approval["Parameters"]["Payload"]
    token_keys = [k for k, v in payload.items() if v == "$$.Task.Token"]
    assert token_keys and all(k.endswith(".$") for k in token_keys), payload
    # The decision lands where CallTool's input model reads it.
    assert _field(approval["ResultPath"]) in CallItem.model_fields


def test_tool_calls_map_carries_a_cursor_not_results(states):
    tool_calls = states["ToolCalls"]
    assert tool_calls["Type"] == "Map"
    assert tool_calls["ItemsPath"] == "$.calls"
    assert "ResultPath" in tool_calls and tool_calls["ResultPath"] is None
    assert tool_calls["MaxConcurrency"] == DeploymentConfig().map_max_concurrency
    assert tool_calls["ItemProcessor"]["StartAt"] == "Dispatch"


def test_paths_match_the_runtime_input_models(states):
    # ModelTurn is handed exactly a Cursor: the state's fields, and when the state was entered.
    params = states["ModelTurn"]["Parameters"]
    assert {k.removesuffix(".$") for k in params} == set(Cursor.model_fields)
    context = {"entered_at.$": "$$.State.EnteredTime"}
    assert all(k.endswith(".$") and v == context.get(k, f"$.{k[:-2]}") for k, v in params.items()), params
    # The Map item is a CallItem: the dispatch choice reads its fields.
    for choice in states["Dispatch"]["Choices"]:
        assert _field(choice["Variable"]) in CallItem.model_fields
    assert _field(states["WaitForEvent"]["ResultPath"]) in CallItem.model_fields
    assert _field(states["WaitForEvent"]["TimeoutSecondsPath"]) in CallItem.model_fields
    assert _field(states["WaitTimer"]["TimestampPath"]) in CallItem.model_fields


def test_every_route_a_model_turn_returns_is_a_branch_of_the_route_choice(states):
    # ModelTurn returns a Route; the Route choice sends each value on, and Done to its default (Finish).
    route = states["Route"]
    assert {c["Variable"] for c in route["Choices"]} == {"$.route"}
    # INLINE only in a definition with an agent that runs read tools inline (tests/infra/test_inline_reads.py).
    assert {c["StringEquals"] for c in route["Choices"]} == {r.value for r in Route} - {Route.DONE.value, Route.INLINE.value}
    assert route["Default"] == "Finish"


def test_every_wait_a_tool_call_item_carries_is_a_branch_of_the_dispatch_choice(states):
    waits = {c["StringEquals"] for c in states["Dispatch"]["Choices"] if c["Variable"] == "$.wait"}
    assert waits == set(typing.get_args(CallItem.model_fields["wait"].annotation)) - {"none"}
    assert states["Dispatch"]["Default"] == "CallTool"


def test_definition_matches_golden_copy(definition):
    actual = serialize(definition)
    if UPDATE_GOLDEN:
        GOLDEN_FILE.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN_FILE.write_text(actual)
        assert GOLDEN_FILE.read_text() == actual
        return
    assert GOLDEN_FILE.is_file(), f"{GOLDEN_FILE} is missing: run with LONGSTEP_UPDATE_GOLDEN=1 to create it"
    expected = GOLDEN_FILE.read_text()
    if actual != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(keepends=True), actual.splitlines(keepends=True), "golden", "synthesized"))
        pytest.fail(
            "the state machine definition differs from the golden copy; if the change is intended, "
            f"regenerate it with LONGSTEP_UPDATE_GOLDEN=1 and review the diff:\n{diff}"
        )
