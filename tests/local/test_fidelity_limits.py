"""AWS's limits and ASL strictness on the local stack, each failing with AWS's error name.

The engine's patches (infra/local/asl_strictness.py) and the API checks
(infra/local/limits.py) cite the AWS pages they follow.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from botocore.exceptions import ClientError

from longstep_kit.local import limits
from longstep_kit.local.dispatch import Dispatcher
from longstep_kit.testing.wait import wait_execution

BIG = "x" * (limits.MAX_PAYLOAD_BYTES + 1)


def _machine(stack, definition: dict, name: str) -> str:
    sfn = stack.client("stepfunctions")
    role = stack.client("iam").list_roles()["Roles"][0]["Arn"]
    return sfn.create_state_machine(name=name, definition=json.dumps(definition), roleArn=role)["stateMachineArn"]


def _run(stack, arn: str, payload: dict) -> dict:
    sfn = stack.client("stepfunctions")
    execution = sfn.start_execution(stateMachineArn=arn, input=json.dumps(payload))["executionArn"]
    return wait_execution(sfn, execution)


def _code(call) -> str:
    with pytest.raises(ClientError) as caught:
        call()
    return caught.value.response["Error"]["Code"]


def test_an_execution_name_over_80_characters_is_invalid_name(stack):
    start = lambda: stack.client("stepfunctions").start_execution(stateMachineArn=stack.state_machine_arn, name="n" * 81, input="{}")  # noqa: E731
    assert _code(start) == "InvalidName"


def test_an_execution_input_over_256_kib_is_refused(stack):
    start = lambda: stack.client("stepfunctions").start_execution(stateMachineArn=stack.state_machine_arn, input=json.dumps({"a": BIG}))  # noqa: E731
    assert _code(start) == "ValidationException"


def test_send_task_success_output_over_256_kib_is_refused(stack):
    send = lambda: stack.client("stepfunctions").send_task_success(taskToken="t", output=json.dumps({"a": BIG}))  # noqa: E731
    assert _code(send) == "ValidationException"


def test_a_dynamodb_item_over_400_kb_is_refused_by_moto(stack):
    item = {"pk": {"S": "big"}, "sk": {"S": "big"}, "v": {"S": "x" * (limits.MAX_DYNAMODB_ITEM_BYTES + 1)}}
    put = lambda: stack.client("dynamodb").put_item(TableName=stack.outputs["CheckpointTableName"], Item=item)  # noqa: E731
    assert _code(put) == "ValidationException"


def test_a_state_output_over_256_kib_fails_with_data_limit_exceeded(stack):
    definition = {"StartAt": "Big", "States": {"Big": {"Type": "Pass", "Parameters": {"blob.$": "$.half"}, "ResultPath": "$.copy", "End": True}}}
    described = _run(stack, _machine(stack, definition, "limits-big-state"), {"half": "y" * 150_000})  # input + its copy > 256 KiB
    assert (described["status"], described.get("error")) == ("FAILED", "States.DataLimitExceeded")


@pytest.mark.parametrize("error", ["States.DataLimitExceeded", "States.Runtime"])
def test_states_all_does_not_catch_the_terminal_errors(stack, error):
    from moto.stepfunctions.parser.asl.component.common.error_name.custom_error_name import CustomErrorName
    from moto.stepfunctions.parser.asl.component.common.error_name.error_equals_decl import ErrorEqualsDecl
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName

    everything = ErrorEqualsDecl([StatesErrorName.from_name("States.ALL")])
    env = SimpleNamespace(stack=[StatesErrorName.from_name(error)])
    everything._eval_body(env)
    assert env.stack == [False]
    env = SimpleNamespace(stack=[CustomErrorName("ThrottledError")])
    everything._eval_body(env)
    assert env.stack == [True]  # every other error: as before
    named = ErrorEqualsDecl([StatesErrorName.from_name(error)])
    env = SimpleNamespace(stack=[StatesErrorName.from_name(error)])
    named._eval_body(env)
    assert env.stack == [True]  # named explicitly, it is caught (as in AWS)


def test_a_choice_on_an_absent_field_fails_with_states_runtime(stack):
    definition = {
        "StartAt": "C",
        "States": {
            "C": {"Type": "Choice", "Choices": [{"Variable": "$.missing", "StringEquals": "x", "Next": "A"}], "Default": "B"},
            "A": {"Type": "Succeed"},
            "B": {"Type": "Succeed"},
        },
    }
    described = _run(stack, _machine(stack, definition, "asl-choice-absent"), {"present": 1})
    assert (described["status"], described.get("error")) == ("FAILED", "States.Runtime")


def test_is_present_still_tests_for_an_absent_field(stack):
    definition = {
        "StartAt": "C",
        "States": {
            "C": {"Type": "Choice", "Choices": [{"Variable": "$.missing", "IsPresent": False, "Next": "A"}], "Default": "B"},
            "A": {"Type": "Pass", "Result": {"r": "absent"}, "End": True},
            "B": {"Type": "Fail", "Error": "Wrong"},
        },
    }
    described = _run(stack, _machine(stack, definition, "asl-is-present"), {"present": 1})
    assert (described["status"], json.loads(described["output"])) == ("SUCCEEDED", {"r": "absent"})


def test_a_parameters_path_absent_from_the_input_fails_with_states_runtime(stack):
    definition = {"StartAt": "P", "States": {"P": {"Type": "Pass", "Parameters": {"v.$": "$.missing"}, "End": True}}}
    described = _run(stack, _machine(stack, definition, "asl-parameters-absent"), {"present": 1})
    assert (described["status"], described.get("error")) == ("FAILED", "States.Runtime")


def test_an_execution_past_the_history_limit_fails_with_states_runtime(stack):
    assert limits.MAX_HISTORY_EVENTS == 25_000
    loop = {"StartAt": "Loop", "States": {"Loop": {"Type": "Pass", "Next": "Loop"}}}
    patches = stack.enforcement.patches
    patches.max_history_events = 60  # the real limit takes 12,500 Pass states; the check is the same
    try:
        described = _run(stack, _machine(stack, loop, "limits-history"), {})
    finally:
        patches.max_history_events = limits.MAX_HISTORY_EVENTS
    assert (described["status"], described.get("error")) == ("FAILED", "States.Runtime")
    assert "maximum number of history events" in described["cause"]


def big_response_handler(event, context):
    return {"blob": "z" * (limits.MAX_LAMBDA_RESPONSE_BYTES + 1)}


def test_a_lambda_response_over_6_mb_is_a_function_error():
    dispatcher = Dispatcher()
    dispatcher.enforce_limits = True
    fn = SimpleNamespace(handler=f"{__name__}.big_response_handler", code={}, function_name="big", environment_vars={}, timeout=3, role=None)
    headers: dict[str, str] = {}
    body = json.loads(dispatcher.invoke(fn, b"{}", headers))
    assert headers["x-amz-function-error"] == "Unhandled"
    assert body["errorType"] == "Function.ResponseSizeTooLarge"


@pytest.mark.parametrize("kind", ["Map", "Parallel"])
def test_a_terminal_error_inside_a_map_or_parallel_keeps_its_name_and_cause(stack, kind):
    """An iteration (or branch) that fails with a ``States.`` error fails the Map (or Parallel)
    with that error and its cause, as in AWS; moto's engine tried to rename it a custom error,
    which may not begin with ``States.``, and failed with its own message instead."""
    inner = {"StartAt": "Big", "States": {"Big": {"Type": "Pass", "Parameters": {"blob.$": "$.half"}, "ResultPath": "$.copy", "End": True}}}
    if kind == "Map":
        state = {"Type": "Map", "ItemsPath": "$.items", "ItemProcessor": {"ProcessorConfig": {"Mode": "INLINE"}, **inner}, "End": True}
    else:
        state = {"Type": "Parallel", "Branches": [inner], "End": True}
    definition = {"StartAt": "Fan", "States": {"Fan": state}}
    payload = {"half": "y" * 100_000, "items": [{"half": "y" * 150_000}]} if kind == "Map" else {"half": "y" * 150_000}
    described = _run(stack, _machine(stack, definition, f"limits-inside-{kind.lower()}"), payload)
    assert (described["status"], described.get("error")) == ("FAILED", "States.DataLimitExceeded")
    assert "Custom Error Names" not in (described.get("cause") or "")
