"""The enforced rows of docs/local-fidelity.md are the enforcement's doing, not moto's.

The same violations the enforced tests refuse (tests/local/test_fidelity_iam.py,
tests/local/test_fidelity_limits.py) go through on a stack started with ``enforce=False``: so
each of those tests fails when the enforcement is removed. And the only way to remove it is an
explicit flag (``longstep local run --no-enforce``, ``LocalStack(enforce=False)``), which warns
(tests/local/test_fidelity_doc.py).
"""

from __future__ import annotations

import json

import pytest

from longstep import clients
from longstep_kit.local import iam, limits
from longstep_kit.local.stack import LocalStack
from longstep_kit.testing.wait import wait_execution


@pytest.fixture(scope="module")
def lax():
    with pytest.warns(UserWarning, match="enforcement is OFF"):
        with LocalStack(enforce=False) as local:
            yield local


def _machine(stack, definition: dict, name: str) -> str:
    role = stack.client("iam").list_roles()["Roles"][0]["Arn"]
    return stack.client("stepfunctions").create_state_machine(name=name, definition=json.dumps(definition), roleArn=role)["stateMachineArn"]


def _run(stack, arn: str, payload: dict) -> dict:
    sfn = stack.client("stepfunctions")
    return wait_execution(sfn, sfn.start_execution(stateMachineArn=arn, input=json.dumps(payload))["executionArn"])


def _role(stack, handler: str) -> str:
    (fn,) = [f for f in stack.client("lambda").list_functions()["Functions"] if f["Handler"] == f"longstep_functions.{handler}"]
    return fn["Role"]


def test_nothing_is_checked(lax):
    assert not lax.enforce and lax.enforcement.policies is None
    assert not lax.dispatcher.enforce_limits  # the 6 MB Lambda response check is off too


def test_iam_without_enforcement_lets_a_role_do_what_its_policy_does_not_allow(lax):
    # test_fidelity_iam::test_each_service_refuses_with_its_own_error refuses this very call.
    with iam.acting_as(_role(lax, "call_tool.lambda_handler")):
        started = clients.client("stepfunctions").start_execution(stateMachineArn=lax.state_machine_arn, name="lax-iam", input="{}")
    described = lax.client("stepfunctions").describe_execution(executionArn=started["executionArn"])
    assert described["name"] == "lax-iam"  # the execution exists: nothing refused the call


def test_limits_without_enforcement_are_moto_s_leniency(lax):
    sfn = lax.client("stepfunctions")
    # test_fidelity_limits: InvalidName, then ValidationException, for the same two calls.
    long_name = sfn.start_execution(stateMachineArn=lax.state_machine_arn, name="n" * 81, input="{}")["executionArn"]
    big = json.dumps({"a": "x" * (limits.MAX_PAYLOAD_BYTES + 1)})
    big_input = sfn.start_execution(stateMachineArn=lax.state_machine_arn, name="lax-big-input", input=big)["executionArn"]
    assert long_name.endswith(":" + "n" * 81)  # accepted under its 81-character name
    assert len(sfn.describe_execution(executionArn=big_input)["input"].encode()) > limits.MAX_PAYLOAD_BYTES  # kept whole


def test_a_choice_on_an_absent_field_passes_without_enforcement(lax):
    definition = {
        "StartAt": "C",
        "States": {
            "C": {"Type": "Choice", "Choices": [{"Variable": "$.missing", "StringEquals": "x", "Next": "A"}], "Default": "B"},
            "A": {"Type": "Succeed"},
            "B": {"Type": "Succeed"},
        },
    }
    assert _run(lax, _machine(lax, definition, "lax-choice"), {"present": 1})["status"] == "SUCCEEDED"


def test_a_terminal_error_inside_a_map_is_renamed_without_enforcement(lax):
    inner = {"StartAt": "Big", "States": {"Big": {"Type": "Pass", "Parameters": {"blob.$": "$.half"}, "ResultPath": "$.copy", "End": True}}}
    state = {"Type": "Map", "ItemsPath": "$.items", "ItemProcessor": {"ProcessorConfig": {"Mode": "INLINE"}, **inner}, "End": True}
    described = _run(lax, _machine(lax, {"StartAt": "Fan", "States": {"Fan": state}}, "lax-map"), {"items": [{"half": "y" * 150_000}]})
    # test_fidelity_limits: States.DataLimitExceeded, as in AWS. moto: its own States.Runtime.
    assert (described["status"], described.get("error")) == ("FAILED", "States.Runtime")
    assert "Custom Error Names" in described["cause"]
