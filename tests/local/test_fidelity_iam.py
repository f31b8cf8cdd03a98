"""The local stack checks every AWS call a function makes against that function's synthesized role.

Each denial fails with the error code the service returns (infra/local/iam.py cites
them); calls made by the local stack itself run as an administrator. The grants issue 12 found
missing (S3 reads for CallTool and InitRun, snapshot writes for ModelTurn, prefix-scoped
ListBucket) are tested here through the roles as deployed: each test fails on the old grants.
"""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.exceptions import ClientError

from longstep import clients
from longstep.artifacts import ARTIFACT_PREFIX, ArtifactStore
from longstep_kit.local import iam
from longstep_kit.local.iam_actions import ENGINE_ACCESS_KEY


def _role(stack, handler: str) -> str:
    functions = stack.client("lambda").list_functions()["Functions"]
    (fn,) = [f for f in functions if f["Handler"] == f"longstep_functions.{handler}"]
    return fn["Role"]


def _function(stack, handler: str) -> str:
    functions = stack.client("lambda").list_functions()["Functions"]
    (fn,) = [f for f in functions if f["Handler"] == f"longstep_functions.{handler}"]
    return fn["FunctionArn"]


def _code(call) -> str:
    with pytest.raises(ClientError) as caught:
        call()
    return caught.value.response["Error"]["Code"]


def test_each_service_refuses_with_its_own_error(stack):
    bucket, table = stack.outputs["ArtifactBucketName"], stack.outputs["CheckpointTableName"]
    topic = [t["TopicArn"] for t in stack.client("sns").list_topics()["Topics"]][0]
    init_run, call_tool = _role(stack, "init_run.lambda_handler"), _role(stack, "call_tool.lambda_handler")
    with iam.acting_as(init_run):
        assert _code(lambda: clients.client("s3").put_object(Bucket=bucket, Key="x", Body=b"1")) == "AccessDenied"
        key = {"pk": {"S": "r"}, "sk": {"S": "s"}}
        assert _code(lambda: clients.client("dynamodb").delete_item(TableName=table, Key=key)) == "AccessDeniedException"
        clients.client("dynamodb").get_item(TableName=table, Key=key)  # granted: goes through
    with iam.acting_as(call_tool):
        assert _code(lambda: clients.client("sns").publish(TopicArn=topic, Message="m")) == "AuthorizationError"
        start = lambda: clients.client("stepfunctions").start_execution(stateMachineArn=stack.state_machine_arn, input="{}")  # noqa: E731
        assert _code(start) == "AccessDeniedException"


def test_the_local_stack_itself_acts_as_an_administrator(stack):
    bucket = stack.outputs["ArtifactBucketName"]
    assert iam.acting_role() is None
    stack.client("s3").put_object(Bucket=bucket, Key="admin/x", Body=b"1")
    clients.client("s3").put_object(Bucket=bucket, Key="admin/y", Body=b"1")


def test_the_state_machine_role_must_allow_each_lambda_invoke(stack):
    # moto's engine invokes Lambda with its own clients (access key "ak"): checked as the state machine's role.
    engine = boto3.client("lambda", region_name="us-east-1", aws_access_key_id=ENGINE_ACCESS_KEY, aws_secret_access_key="sk")
    approval_api = _function(stack, "approval_api.lambda_handler")  # not a task of the state machine
    assert _code(lambda: engine.invoke(FunctionName=approval_api, Payload=b"{}")) == "AccessDeniedException"
    finish = _function(stack, "finish.lambda_handler")
    # The tasks call versions (pinning): the role may invoke every version, never $LATEST.
    assert engine.invoke(FunctionName=f"{finish}:1", Payload=json.dumps({}).encode())["StatusCode"] == 200  # allowed (the handler may fail)
    assert _code(lambda: engine.invoke(FunctionName=finish, Payload=b"{}")) == "AccessDeniedException"


def test_call_tool_can_read_an_offloaded_artifact_and_a_missing_one_is_no_such_key(stack):
    artifacts = ArtifactStore(stack.outputs["ArtifactBucketName"], clients.client("s3"))
    ref = ArtifactStore(stack.outputs["ArtifactBucketName"], stack.client("s3")).put(b"x" * 1000)
    with iam.acting_as(_role(stack, "call_tool.lambda_handler")):
        assert artifacts.get(ref["uri"]) == b"x" * 1000  # read_artifact
        assert _code(lambda: artifacts.get("artifact://sha256/" + "0" * 64)) == "NoSuchKey"  # ListBucket on the prefix


def test_init_run_can_read_an_offloaded_snapshot(stack):
    ref = ArtifactStore(stack.outputs["ArtifactBucketName"], stack.client("s3")).put(b'{"state": 1}')
    with iam.acting_as(_role(stack, "init_run.lambda_handler")):
        assert ArtifactStore(stack.outputs["ArtifactBucketName"], clients.client("s3")).get(ref["uri"]) == b'{"state": 1}'


def test_model_turn_can_write_a_large_snapshot(stack):
    with iam.acting_as(_role(stack, "model_turn.lambda_handler")):
        ref = ArtifactStore(stack.outputs["ArtifactBucketName"], clients.client("s3")).put(b"s" * 500_000)
    assert stack.client("s3").head_object(Bucket=stack.outputs["ArtifactBucketName"], Key=ARTIFACT_PREFIX + ref["sha256"])


def test_a_missing_key_outside_the_listable_prefix_is_access_denied(stack):
    # ListBucket is granted on the artifacts prefix only: elsewhere a missing key is a 403, as in AWS.
    with iam.acting_as(_role(stack, "model_turn.lambda_handler")):
        get = lambda: clients.client("s3").get_object(Bucket=stack.outputs["ArtifactBucketName"], Key="scripts/missing.json")  # noqa: E731
        assert _code(get) == "AccessDenied"


def test_the_roles_of_a_whole_run_are_enforced(stack, triage):
    from longstep_kit.local.runner import run_scenario

    checked: list[str] = []
    original = iam.check

    def recording(policies, role, requests):
        checked.append(role.rsplit("/", 1)[-1])
        return original(policies, role, requests)

    iam.check = recording
    try:
        stack.reset_data()
        report = run_scenario(stack, triage)
    finally:
        iam.check = original
    assert report["status"] == "SUCCEEDED"
    roles = {name.split("-")[1] for name in checked}
    for expected in (
        "AgentInitRunRole",
        "AgentModelTurnRole",
        "AgentCallTooltriageRole",
        "AgentRequestApprovalRole",
        "AgentFinishRole",
        "AgentStateMachineRole",
    ):
        assert any(r.startswith(expected) for r in roles), (expected, roles)


def test_a_role_beside_the_template_is_checked_against_its_own_policy(stack):
    """A bench's or a test's own role (the waits bench's poller) is not exempted: refused until
    its policy is registered (``Enforcement.allow_role``), then allowed exactly that."""
    table = stack.outputs["CheckpointTableName"]
    table_arn = stack.client("dynamodb").describe_table(TableName=table)["Table"]["TableArn"]
    trust = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}],
    }
    role = stack.client("iam").create_role(RoleName="beside-the-template", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    key = {"pk": {"S": "r"}, "sk": {"S": "s"}}
    ddb = clients.client("dynamodb")
    try:
        with iam.acting_as(role):
            assert _code(lambda: ddb.get_item(TableName=table, Key=key)) == "AccessDeniedException"
            stack.enforcement.allow_role(role, [{"Effect": "Allow", "Action": "dynamodb:GetItem", "Resource": table_arn}])
            ddb.get_item(TableName=table, Key=key)
            assert _code(lambda: ddb.delete_item(TableName=table, Key=key)) == "AccessDeniedException"
    finally:
        stack.enforcement.policies.roles.pop(role, None)
