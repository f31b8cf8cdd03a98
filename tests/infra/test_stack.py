"""The synthesized Longstep stack: storage, functions, layer, state machine and hygiene rules.

Expectations come from the code the runtime shares with the stack (``longstep.keys``,
``longstep.settings``), so a key or variable renamed on one side fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path
import inspect
import json
from typing import Any

import pytest
from aws_cdk.assertions import Match

from longstep_kit.config import DeploymentConfig, load_config
from agents import triage_world as world
from longstep import keys
from longstep import settings as env
from longstep.resources import ENV_AGENT

from .test_state_machine import TASK_HANDLERS
from .conftest import REPO_ROOT, load_app_module, resources_of_type

# The loop's functions behind no state of their own: an eval run's CallTool (docs/evals.md), which
# BindEval-<agent> puts behind the CallTool and CallOneTool states.
LOOP_HANDLERS = set(TASK_HANDLERS.values()) | {"longstep_functions.call_tool_eval.lambda_handler"}
TABLE = "AWS::DynamoDB::Table"
FUNCTION = "AWS::Lambda::Function"

# Construct-path prefix of each table's logical id -> the schema that defines it.
TABLES = {
    "StorageCheckpoints": keys.checkpoint_table,
    "StorageIdempotency": keys.idempotency_table,
    "StorageApprovals": keys.approvals_table,
    "StorageMemory": keys.memory_table,
    # The sample agent's own tables, created from its declarations (agents/triage_world.py).
    **{f"ResourcestriageTable{table.name}": table.schema for table in world.RESOURCES},
}
WORLD_ENV = {table.variable: f"ResourcestriageTable{table.name}" for table in world.RESOURCES}
PER_AGENT_HANDLERS = {
    "longstep_functions.call_tool.lambda_handler",
    "longstep_functions.call_tool_eval.lambda_handler",
    "longstep_functions.check_condition.lambda_handler",
}
STORAGE_OUTPUTS = {
    "StateMachineArn",
    "CheckpointTableName",
    "IdempotencyTableName",
    "ArtifactBucketName",
    "DashboardName",
    "ApprovalsTableName",
    "ApprovalTopicArn",
    "ApprovalApiUrl",
    "MemoryTableName",
    "AlarmTopicArn",
    "LinkKeySecretArn",  # operators mint page links with it (longstep approvals, inbox-link)
    "SignalBusName",  # where the named signallers put signal events
}
# The approval API's functions (infra/constructs/approval_api.py): not tasks of the state machine.
API_HANDLERS = {
    "longstep_functions.approval_api.lambda_handler",
    "longstep_functions.approval_api.signal_handler",
    "longstep_functions.rotate_link_key.lambda_handler",  # the approval pages' link key (not a task either)
}
# Properties that would give a resource a fixed physical name (breaks replacement and
# side-by-side stacks). AWS::IAM::Policy's PolicyName is an inline policy name, not a resource name.
PHYSICAL_NAME_PROPERTIES = {
    "TableName",
    "BucketName",
    "FunctionName",
    "StateMachineName",
    "LogGroupName",
    "RoleName",
    "LayerName",
}


def _effective_config() -> DeploymentConfig:
    """The configuration the session template was synthesized with (cdk.json's ``longstep``)."""
    cdk_json = json.loads((REPO_ROOT / "cdk.json").read_text())
    return load_config(cdk_json.get("context", {}).get("longstep"))


def _one(resources: dict[str, dict[str, Any]], prefix: str) -> tuple[str, dict[str, Any]]:
    found = [(lid, res) for lid, res in resources.items() if lid.startswith(prefix)]
    assert len(found) == 1, f"expected one resource named {prefix}*, found {[lid for lid, _ in found]}"
    return found[0]


def _functions_by_handler(template: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    return {res["Properties"]["Handler"]: (lid, res) for lid, res in resources_of_type(template, FUNCTION).items()}


def _loop_functions(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The functions behind the state machine's tasks (the approval API's are not)."""
    return {lid: fn for lid, fn in resources_of_type(template, FUNCTION).items() if fn["Properties"]["Handler"] not in API_HANDLERS}


def _ref(template: dict[str, Any], prefix: str) -> dict[str, str]:
    lid = next(lid for lid in template["Resources"] if lid.startswith(prefix))
    return {"Ref": lid}


# -- tables ---------------------------------------------------------------------------------------


def test_table_count(template, cdk_template):
    cdk_template.resource_count_is(TABLE, len(TABLES))
    assert sorted(lid[:-8] for lid in resources_of_type(template, TABLE)) == sorted(TABLES)


def test_checkpoint_table_matches_keys_module(cdk_template):
    schema = keys.checkpoint_table()
    assert schema.ttl_attribute, "the checkpoint table must expire records"
    cdk_template.has_resource_properties(
        TABLE,
        {
            "KeySchema": schema.key_schema(),
            "AttributeDefinitions": Match.array_equals(schema.attribute_definitions()),
            "TimeToLiveSpecification": {"AttributeName": schema.ttl_attribute, "Enabled": True},
            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
            "SSESpecification": {"SSEEnabled": True},
        },
    )


def test_idempotency_table_uses_powertools_layout(cdk_template):
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

    params = inspect.signature(DynamoDBPersistenceLayer.__init__).parameters
    schema = keys.idempotency_table()
    # Powertools' persistence layer defaults: the runtime relies on them.
    assert (
        (schema.partition_key, schema.sort_key, schema.ttl_attribute)
        == (
            params["key_attr"].default,
            None,
            params["expiry_attr"].default,
        )
        == ("id", None, "expiration")
    )
    cdk_template.has_resource_properties(
        TABLE,
        {
            "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}],
            "TimeToLiveSpecification": {"AttributeName": "expiration", "Enabled": True},
            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
            "SSESpecification": {"SSEEnabled": True},
        },
    )


@pytest.mark.parametrize("prefix", sorted(TABLES))
def test_each_table_is_keyed_per_keys_module(template, prefix):
    schema = TABLES[prefix]()
    _, table = _one(resources_of_type(template, TABLE), prefix)
    props = table["Properties"]
    assert props["KeySchema"] == schema.key_schema()
    assert sorted(props["AttributeDefinitions"], key=lambda a: a["AttributeName"]) == sorted(
        schema.attribute_definitions(), key=lambda a: a["AttributeName"]
    )
    if schema.ttl_attribute:
        assert props.get("TimeToLiveSpecification") == {"AttributeName": schema.ttl_attribute, "Enabled": True}
    else:
        assert "TimeToLiveSpecification" not in props
    assert props.get("BillingMode") == "PAY_PER_REQUEST"
    assert props.get("PointInTimeRecoverySpecification") == {"PointInTimeRecoveryEnabled": True}
    assert props.get("SSESpecification", {}).get("SSEEnabled") is True
    assert table.get("DeletionPolicy") == ("Delete" if _effective_config().destroy_on_delete else "Retain")


# -- bucket ---------------------------------------------------------------------------------------


def test_artifact_bucket_blocks_public_access_and_is_encrypted(cdk_template, template):
    cdk_template.resource_count_is("AWS::S3::Bucket", 1)
    cdk_template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            },
            "BucketEncryption": {
                "ServerSideEncryptionConfiguration": Match.array_with([{"ServerSideEncryptionByDefault": {"SSEAlgorithm": Match.any_value()}}])
            },
        },
    )
    # enforce_ssl: the bucket policy denies every request not made over TLS.
    policies = resources_of_type(template, "AWS::S3::BucketPolicy")
    statements = [s for p in policies.values() for s in p["Properties"]["PolicyDocument"]["Statement"]]
    assert any(s["Effect"] == "Deny" and s.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport") == "false" for s in statements), statements


# -- functions and layer --------------------------------------------------------------------------


def test_every_function_gets_storage_names_from_settings_constants(template):
    functions = _loop_functions(template)
    assert len(functions) == len(LOOP_HANDLERS)
    expected = {
        env.ENV_CHECKPOINT_TABLE: _ref(template, "StorageCheckpoints"),
        env.ENV_IDEMPOTENCY_TABLE: _ref(template, "StorageIdempotency"),
        env.ENV_ARTIFACT_BUCKET: _ref(template, "StorageArtifacts"),
    }
    for lid, fn in functions.items():
        variables = fn["Properties"].get("Environment", {}).get("Variables", {})
        for name, value in expected.items():
            assert variables.get(name) == value, f"{lid}: {name} is {variables.get(name)!r}, want {value!r}"


def test_function_settings_reflect_the_configuration(template):
    config = _effective_config()
    for lid, fn in resources_of_type(template, FUNCTION).items():
        assert fn["Properties"]["MemorySize"] == config.lambda_memory_mb, lid
    for lid, fn in _loop_functions(template).items():
        variables = fn["Properties"]["Environment"]["Variables"]
        # The default model's profile for the deploy's Region (constructs/model_profile.py).
        assert variables[env.ENV_MODEL_ID] == {"Fn::FindInMap": ["ModelProfiles", {"Ref": "AWS::Region"}, "Profile"]}, lid
        assert template["Mappings"]["ModelProfiles"]["us-east-1"]["Profile"] == config.model_id
        assert variables[env.ENV_MAX_TURNS] == str(config.max_turns), lid
        assert variables[env.ENV_OFFLOAD_THRESHOLD_BYTES] == str(config.offload_threshold_bytes), lid
        assert variables[env.ENV_RETENTION_DAYS] == str(config.retention_days), lid
        assert fn["Properties"]["MemorySize"] == config.lambda_memory_mb, lid


def test_call_tool_gets_and_may_use_the_world_tables(template):
    lid, call_tool = _functions_by_handler(template)["longstep_functions.call_tool.lambda_handler"]
    variables = call_tool["Properties"]["Environment"]["Variables"]
    assert variables[ENV_AGENT] == "triage"
    # It serves its own agent only.
    assert json.loads(variables[env.ENV_AGENTS]) == {"triage": "agents.triage:build"}
    for name, prefix in WORLD_ENV.items():
        assert variables.get(name) == _ref(template, prefix), f"{lid}: {name}"
    assert call_tool["Properties"]["Timeout"] == _effective_config().tool_timeout_seconds
    # The function's role may read and write each world table.
    role = call_tool["Properties"]["Role"]["Fn::GetAtt"][0]
    policy_text = json.dumps([p for p in resources_of_type(template, "AWS::IAM::Policy").values() if {"Ref": role} in p["Properties"]["Roles"]])
    for prefix in WORLD_ENV.values():
        assert json.dumps({"Fn::GetAtt": [_ref(template, prefix)["Ref"], "Arn"]}) in policy_text, prefix


def test_every_handler_exists_in_the_functions_package(template):
    import longstep_functions

    handlers = _functions_by_handler(template)
    assert set(handlers) == LOOP_HANDLERS | API_HANDLERS
    for handler in handlers:
        module, func = handler.rsplit(".", 1)
        assert module.startswith("longstep_functions."), handler
        source = Path(longstep_functions.__file__).parent / f"{module.rsplit('.', 1)[1]}.py"
        assert source.is_file(), f"{handler}: {source} is missing"
        defined = {n.name for n in ast.parse(source.read_text()).body if isinstance(n, ast.FunctionDef)}
        assert func in defined, f"{handler}: {source.name} defines no {func}"


def test_functions_use_the_runtime_layer(template):
    layers = resources_of_type(template, "AWS::Lambda::LayerVersion")
    assert len(layers) == 1
    layer_id, layer = next(iter(layers.items()))
    for lid, fn in resources_of_type(template, FUNCTION).items():
        props = fn["Properties"]
        assert props.get("Layers") == [{"Ref": layer_id}], lid
        assert props["Runtime"] in layer["Properties"]["CompatibleRuntimes"], lid
        assert set(props.get("Architectures", ["x86_64"])) <= set(layer["Properties"]["CompatibleArchitectures"]), lid


def test_functions_log_to_their_own_log_groups(template):
    log_groups = resources_of_type(template, "AWS::Logs::LogGroup")
    targets = []
    for lid, fn in resources_of_type(template, FUNCTION).items():
        target = fn["Properties"].get("LoggingConfig", {}).get("LogGroup", {}).get("Ref")
        assert target in log_groups, f"{lid} logs to {target!r}, not to a log group of the stack"
        targets.append(target)
    assert len(set(targets)) == len(targets)


def test_model_turn_may_invoke_bedrock(template):
    _, model_turn = _functions_by_handler(template)["longstep_functions.model_turn.lambda_handler"]
    role = model_turn["Properties"]["Role"]["Fn::GetAtt"][0]
    actions = [
        s["Action"]
        for p in resources_of_type(template, "AWS::IAM::Policy").values()
        if {"Ref": role} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    flat = [a for action in actions for a in (action if isinstance(action, list) else [action])]
    assert "bedrock:InvokeModel" in flat
    assert model_turn["Properties"]["Timeout"] == _effective_config().model_timeout_seconds


# -- state machine and hygiene --------------------------------------------------------------------


def test_exactly_one_standard_state_machine(template, cdk_template):
    (machine,) = resources_of_type(template, "AWS::StepFunctions::StateMachine").values()
    assert machine["Properties"]["StateMachineType"] == "STANDARD"
    cdk_template.has_resource_properties(
        "AWS::StepFunctions::StateMachine",
        {"StateMachineType": "STANDARD", "TracingConfiguration": {"Enabled": True}},
    )


def test_no_hard_coded_physical_names(template):
    # A literal string is a fixed name; a Ref or GetAtt (a Lambda permission's FunctionName) refers to one.
    offenders = [
        f"{lid}.{prop}"
        for lid, res in template["Resources"].items()
        for prop, value in res.get("Properties", {}).items()
        if prop in PHYSICAL_NAME_PROPERTIES and isinstance(value, str)
    ]
    assert offenders == []


def _mentions_stack_id(node) -> bool:
    if isinstance(node, dict):
        return node == {"Ref": "AWS::StackId"} or any(_mentions_stack_id(v) for v in node.values())
    if isinstance(node, list):
        return any(_mentions_stack_id(v) for v in node)
    return False


def test_a_retained_resource_with_a_name_of_ours_is_named_per_stack_instance(template):
    # Retained resources outlive `cdk destroy`: one whose name the template gives must differ at the
    # next create, or the second deploy fails on the name (issue 25). The state machine's log group
    # is the one such name (under /aws/vendedlogs/states/: https://docs.aws.amazon.com/step-functions/latest/dg/bp-cwl.html).
    named = {
        f"{lid}.{prop}": value
        for lid, res in template["Resources"].items()
        if res.get("DeletionPolicy") == "Retain"
        for prop, value in res.get("Properties", {}).items()
        # a Ref or GetAtt names another resource (a version's FunctionName), not this one
        if prop in PHYSICAL_NAME_PROPERTIES and not (isinstance(value, dict) and set(value) & {"Ref", "Fn::GetAtt"})
    }
    (machine,) = resources_of_type(template, "AWS::StepFunctions::StateMachine").values()
    (destination,) = machine["Properties"]["LoggingConfiguration"]["Destinations"]
    vended = destination["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"][0]
    assert list(named) == [f"{vended}.LogGroupName"]
    for where, value in named.items():
        assert _mentions_stack_id(value), f"{where} is the same at every create: {value}"


def test_every_log_group_has_retention(template):
    log_groups = resources_of_type(template, "AWS::Logs::LogGroup")
    # The functions and the state machine (the approval API's access log only with stage logs on).
    assert len(log_groups) == len(LOOP_HANDLERS) + len(API_HANDLERS) + 1
    for lid, group in log_groups.items():
        assert group.get("Properties", {}).get("RetentionInDays") == _effective_config().log_retention_days, lid


def test_nothing_moto_cannot_deploy(template):
    types = {res["Type"] for res in template["Resources"].values()}
    assert not [t for t in types if t.startswith("Custom::") or t == "AWS::CloudFormation::CustomResource"]
    assert "AWS::DynamoDB::GlobalTable" not in types


def test_outputs_name_the_right_resources(template):
    outputs = template["Outputs"]
    assert outputs["StateMachineArn"]["Value"] == {"Ref": next(iter(resources_of_type(template, "AWS::StepFunctions::StateMachine")))}
    assert outputs["CheckpointTableName"]["Value"] == _ref(template, "StorageCheckpoints")
    assert outputs["IdempotencyTableName"]["Value"] == _ref(template, "StorageIdempotency")
    assert outputs["ArtifactBucketName"]["Value"] == _ref(template, "StorageArtifacts")
    # The agents' tables are no outputs: their names are in their own functions' environments only.
    assert not [name for name in outputs if name not in STORAGE_OUTPUTS], sorted(outputs)


def test_local_synth_applies_cdk_json_feature_flags(template):
    cdk_json = json.loads((REPO_ROOT / "cdk.json").read_text())
    assert cdk_json["context"].get("@aws-cdk/aws-iam:minimizePolicies") is True
    # With minimizePolicies, the state machine role gets one lambda:InvokeFunction statement.
    (sm,) = resources_of_type(template, "AWS::StepFunctions::StateMachine").values()
    role = sm["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    statements = [
        s
        for p in resources_of_type(template, "AWS::IAM::Policy").values()
        if {"Ref": role} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s["Action"] == "lambda:InvokeFunction"
    ]
    assert len(statements) == 1, f"{len(statements)} lambda:InvokeFunction statements: policies not minimized"


# -- a non-default configuration (the folder's only second synth) ---------------------------------

SANDBOX = {
    "stack_name": "LongstepSandbox-1",
    "max_turns": 7,
    "approval_timeout_hours": 2,
    "map_max_concurrency": 3,
    "log_retention_days": 7,
    "lambda_memory_mb": 1024,
    "destroy_on_delete": True,
    "approval_email": "approvers@example.com",
    "agents": {"triage": "agents.triage:build"},
}


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    app = load_app_module().build_app(context={"longstep": SANDBOX}, outdir=str(tmp_path_factory.mktemp("cdk-sandbox")))
    (stack,) = app.synth().stacks
    return stack.stack_name, stack.template


def test_sandbox_config_flows_into_the_template(sandbox):
    from longstep_kit.testing.asl import all_states, state_machine_definitions

    stack_name, template = sandbox
    assert stack_name == SANDBOX["stack_name"]
    # The storage tables and the agent's own; its tables' names reach its tool functions only.
    tables = resources_of_type(template, TABLE)
    assert sorted(lid[:-8] for lid in tables) == sorted(TABLES)
    for lid, fn in resources_of_type(template, FUNCTION).items():
        variables = fn["Properties"]["Environment"]["Variables"]
        per_agent = fn["Properties"]["Handler"] in PER_AGENT_HANDLERS
        assert bool(set(WORLD_ENV) & set(variables)) == per_agent, lid
        assert (ENV_AGENT in variables) == per_agent, lid
        assert fn["Properties"]["MemorySize"] == 1024
    for lid, fn in _loop_functions(template).items():
        assert fn["Properties"]["Environment"]["Variables"][env.ENV_MAX_TURNS] == "7", lid
    _, request_approval = _functions_by_handler(template)["longstep_functions.request_approval.lambda_handler"]
    assert request_approval["Properties"]["Environment"]["Variables"][env.ENV_APPROVAL_TIMEOUT_SECONDS] == str(2 * 3600)
    (subscription,) = resources_of_type(template, "AWS::SNS::Subscription").values()
    assert (subscription["Properties"]["Protocol"], subscription["Properties"]["Endpoint"]) == ("email", SANDBOX["approval_email"])
    # destroy_on_delete: the data goes with the stack, and still with no custom resource.
    for lid, res in {**tables, **resources_of_type(template, "AWS::S3::Bucket")}.items():
        assert res.get("DeletionPolicy") == "Delete", lid
    assert not [r["Type"] for r in template["Resources"].values() if r["Type"].startswith("Custom::")]
    for lid, group in resources_of_type(template, "AWS::Logs::LogGroup").items():
        assert group["Properties"]["RetentionInDays"] == 7, lid
    (definition,) = state_machine_definitions(template).values()
    states = all_states(definition)
    assert states["RequestApproval"]["TimeoutSeconds"] == 2 * 3600
    assert states["ToolCalls"]["MaxConcurrency"] == 3
    assert set(template["Outputs"]) == STORAGE_OUTPUTS
