"""cdk-nag 3 on the app: AwsSolutions and Serverless rules, with the default and the KMS configuration.

Nag runs on the construct tree (``validate_scope``), so these apps are built but, except the KMS
one whose template is checked below, never synthesized. Findings are fixed in the constructs;
what remains is acknowledged where it arises, each with a reason of its own.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from .conftest import REPO_ROOT, load_app_module, resources_of_type

ACKNOWLEDGED = "aws:cdk:acknowledged-rules"
# The opt-in variant: a customer-managed key, model providers with API-key secrets, alarm
# subscribers and API Gateway's account-wide CloudWatch role.
PROVIDERS = {
    "anthropic": {"secret_id": "longstep/anthropic"},
    "openai": {"secret_id": "arn:aws:secretsmanager:us-east-1:123456789012:secret:openai-AbCdEf", "base_url": "https://api.openai.com/v1"},
}
KMS = {
    "customer_managed_key": True,
    "model_providers": PROVIDERS,
    "alarm_emails": ["oncall@example.com"],
    "api_gateway_cloudwatch_role": True,
}


def _context(overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """cdk.json's context (deployment config and feature flags), as ``cdk synth`` sees it."""
    context = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]
    context["longstep"] = {**context["longstep"], **(overrides or {})}
    return context


def _build(tmp_path_factory, overrides: dict[str, Any] | None = None):
    return load_app_module().build_app(context=_context(overrides), outdir=str(tmp_path_factory.mktemp("cdk-nag")))


@pytest.fixture(scope="module")
def default_app(tmp_path_factory):
    return _build(tmp_path_factory)


@pytest.fixture(scope="module")
def kms_app(tmp_path_factory):
    return _build(tmp_path_factory, KMS)


@pytest.fixture(scope="module")
def inline_app(tmp_path_factory):
    """An agent with a ModelTurn of its own (its reads inline: docs/cost.md), with KMS and providers."""
    return _build(tmp_path_factory, {**KMS, "agents": {"triage": "agents.triage_inline:build"}})


@pytest.fixture(scope="module")
def kms_template(kms_app) -> dict[str, Any]:
    """The KMS variant's template: the test folder's one synth beyond the shared ones."""
    (stack,) = kms_app.synth().stacks
    return stack.template


def _findings(report) -> list[str]:
    return [f"{v.rule_name} at {', '.join(r.construct_path or str(r.resource_logical_id) for r in v.violating_resources)}" for v in report.violations]


def _packs():
    from cdk_nag import AwsSolutionsChecks, ServerlessChecks

    return [AwsSolutionsChecks(), ServerlessChecks()]


@pytest.mark.parametrize("variant", ["default_app", "kms_app", "inline_app"])
def test_no_unacknowledged_finding(request, variant):
    app = request.getfixturevalue(variant)
    for pack in _packs():
        report = pack.validate_scope(app)
        assert _findings(report) == [], type(pack).__name__
        assert report.success


def test_the_checks_can_fail(tmp_path):
    """A wildcard policy with no acknowledgment is reported: the checks above are not vacuous."""
    import aws_cdk as cdk
    from aws_cdk import aws_iam as iam
    from cdk_nag import AwsSolutionsChecks

    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Careless")
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    role.add_to_policy(iam.PolicyStatement(actions=["s3:*"], resources=["*"]))
    report = AwsSolutionsChecks().validate_scope(app)
    assert not report.success
    assert {"AwsSolutions-IAM5[Action::s3:*]", "AwsSolutions-IAM5[Resource::*]"} <= {v.rule_name for v in report.violations}


def test_every_acknowledgment_is_specific_and_explained(default_app, kms_app):
    for app in (default_app, kms_app):
        acknowledged = [
            (construct.node.path, rule, reason)
            for construct in app.node.find_all()
            for entry in construct.node.metadata
            if entry.type == ACKNOWLEDGED
            for rule, reason in entry.data.items()
        ]
        assert acknowledged
        for path, rule, reason in acknowledged:
            # On the resource that needs it, never on the app or a whole stack.
            assert path.count("/") >= 2, f"{rule} acknowledged on {path}"
            assert rule.removeprefix("Annotation::").startswith(("AwsSolutions-", "Serverless-")), rule
            assert len(reason) >= 40, f"{path} {rule}: {reason!r}"
        # A blanket IAM5 (every wildcard of a resource) would hide the next one: name each finding.
        assert not [rule for _, rule, _ in acknowledged if rule.endswith("AwsSolutions-IAM5")]


# -- least privilege, read from the default template (the session's shared synth) ----------------


def _statements_of(template: dict[str, Any], handler: str) -> list[dict[str, Any]]:
    (fn,) = [f for f in resources_of_type(template, "AWS::Lambda::Function").values() if f["Properties"]["Handler"] == handler]
    role = fn["Properties"]["Role"]["Fn::GetAtt"][0]
    return [
        s
        for p in resources_of_type(template, "AWS::IAM::Policy").values()
        if {"Ref": role} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]


def _actions(statements: list[dict[str, Any]]) -> set[str]:
    return {a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}


def _mentions(statements: list[dict[str, Any]], prefix: str) -> bool:
    return f'"{prefix}' in json.dumps([s["Resource"] for s in statements])


HANDLERS = ["init_run", "model_turn", "call_tool", "request_approval", "escalate", "finish", "delegate_to_subagent", "child_failed"]
# The approval API's functions (full handler names: one module, two handlers).
API_HANDLERS = ["longstep_functions.approval_api.lambda_handler", "longstep_functions.approval_api.signal_handler"]


@pytest.mark.parametrize("handler", [f"longstep_functions.{name}.lambda_handler" for name in HANDLERS] + API_HANDLERS)
def test_functions_have_no_managed_policy_and_no_wildcard_action(template, handler):
    (fn,) = [f for f in resources_of_type(template, "AWS::Lambda::Function").values() if f["Properties"]["Handler"] == handler]
    role = template["Resources"][fn["Properties"]["Role"]["Fn::GetAtt"][0]]
    assert not role["Properties"].get("ManagedPolicyArns"), f"{handler}: managed policies give more than it uses"
    actions = _actions(_statements_of(template, handler))
    assert actions and not [a for a in actions if "*" in a], actions


@pytest.mark.parametrize("name", ["init_run", "request_approval", "escalate", "finish"])
def test_only_the_step_functions_take_the_step_lock(template, name):
    assert not _mentions(_statements_of(template, f"longstep_functions.{name}.lambda_handler"), "StorageIdempotency")


@pytest.mark.parametrize("name", ["request_approval", "escalate"])
def test_functions_that_never_touch_artifacts_cannot(template, name):
    statements = _statements_of(template, f"longstep_functions.{name}.lambda_handler")
    assert not _mentions(statements, "StorageArtifacts")
    assert not [a for a in _actions(statements) if a.startswith("s3:")]


def test_only_model_turn_may_call_bedrock_and_only_the_artifact_readers_read_objects(template):
    # InitRun reads an offloaded snapshot to resume, CallTool serves read_artifact (issue 12).
    readers = ("model_turn", "init_run", "call_tool")
    for name in HANDLERS:
        actions = _actions(_statements_of(template, f"longstep_functions.{name}.lambda_handler"))
        assert ("bedrock:InvokeModel" in actions) == (name == "model_turn"), name
        assert ("s3:GetObject" in actions) == (name in readers), name
        assert ("s3:ListBucket" in actions) == (name in readers), name


def test_only_request_approval_and_the_api_answer_task_tokens_and_only_its_own_state_machine(template):
    (machine_id,) = resources_of_type(template, "AWS::StepFunctions::StateMachine")
    machine = {"Ref": machine_id}
    success = [("states:SendTaskSuccess", machine)]
    # DelegateToSubagent starts the child on the version its own execution runs (longstep.pinning).
    executions = {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                ":states:",
                {"Ref": "AWS::Region"},
                ":",
                {"Ref": "AWS::AccountId"},
                ":execution:",
                {"Fn::GetAtt": [machine_id, "Name"]},
                ":*",
            ],
        ]
    }
    # Subagents (longstep.tasks.delegate_to_subagent): a child's Finish, or its abort, answers the parent's
    # token with its output or its failure; DelegateToSubagent starts the child and may hand an
    # outcome recorded first to a re-parked token.
    either = [(["states:SendTaskFailure", "states:SendTaskSuccess"], machine)]
    answering = {
        "longstep_functions.request_approval.lambda_handler": success,
        **{handler: success for handler in API_HANDLERS},
        "longstep_functions.finish.lambda_handler": either,
        "longstep_functions.child_failed.lambda_handler": either,
        "longstep_functions.delegate_to_subagent.lambda_handler": [
            ("states:StartExecution", machine),
            ("states:DescribeExecution", executions),
            *either,
        ],
    }
    for handler in [f"longstep_functions.{name}.lambda_handler" for name in HANDLERS] + API_HANDLERS:
        statements = [s for s in _statements_of(template, handler) if "states:" in json.dumps(s["Action"])]
        assert sorted(((s["Action"], s["Resource"]) for s in statements), key=str) == sorted(answering.get(handler, []), key=str), handler


def test_only_the_api_reads_the_approvals_index_and_no_function_reads_every_index(template):
    from longstep import keys

    for handler in [f"longstep_functions.{name}.lambda_handler" for name in HANDLERS] + API_HANDLERS:
        resources = json.dumps([s["Resource"] for s in _statements_of(template, handler)])
        assert "/index/*" not in resources, handler
        reads_index = f"/index/{keys.APPROVALS_BY_STATUS_INDEX}" in resources
        assert reads_index == (handler == "longstep_functions.approval_api.lambda_handler"), handler


def test_artifact_writes_are_limited_to_the_content_addressed_prefix(template):
    from longstep.artifacts import ARTIFACT_PREFIX

    for name in ("call_tool", "finish"):
        (put,) = [s for s in _statements_of(template, f"longstep_functions.{name}.lambda_handler") if s["Action"] == "s3:PutObject"]
        assert put["Resource"]["Fn::Join"][1][-1] == f"/{ARTIFACT_PREFIX}*", name


def test_default_template_has_no_customer_managed_key(template):
    assert resources_of_type(template, "AWS::KMS::Key") == {}


# -- the customer-managed key variant --------------------------------------------------------------


def test_one_rotated_key_encrypts_tables_bucket_and_log_groups(kms_template):
    ((key_id, key),) = resources_of_type(kms_template, "AWS::KMS::Key").items()
    assert key["Properties"]["EnableKeyRotation"] is True
    key_arn = {"Fn::GetAtt": [key_id, "Arn"]}
    tables = resources_of_type(kms_template, "AWS::DynamoDB::Table")
    assert len(tables) == 7  # checkpoints, idempotency, approvals, memory, and the triage agent's three tables
    for lid, table in tables.items():
        sse = table["Properties"]["SSESpecification"]
        assert sse == {"KMSMasterKeyId": key_arn, "SSEEnabled": True, "SSEType": "KMS"}, lid
    (bucket,) = resources_of_type(kms_template, "AWS::S3::Bucket").values()
    (rule,) = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"] == {"KMSMasterKeyID": key_arn, "SSEAlgorithm": "aws:kms"}
    assert rule["BucketKeyEnabled"] is True
    log_groups = resources_of_type(kms_template, "AWS::Logs::LogGroup")
    assert log_groups
    for lid, group in log_groups.items():
        assert group["Properties"]["KmsKeyId"] == key_arn, lid
    # The approvals topic and the signals' dead-letter queue too.
    topics = resources_of_type(kms_template, "AWS::SNS::Topic")
    assert len(topics) == 2  # approvals and alarms
    for lid, topic in topics.items():
        assert topic["Properties"]["KmsMasterKeyId"] == key_arn, lid
    (queue,) = resources_of_type(kms_template, "AWS::SQS::Queue").values()
    assert queue["Properties"]["KmsMasterKeyId"] == key_arn


def test_the_key_lets_cloudwatch_logs_encrypt_and_the_functions_use_it(kms_template):
    ((key_id, key),) = resources_of_type(kms_template, "AWS::KMS::Key").items()
    services = [s for s in key["Properties"]["KeyPolicy"]["Statement"] if "Service" in s.get("Principal", {})]
    (logs_statement,) = [s for s in services if '"logs.' in json.dumps(s["Principal"]["Service"])]  # not delivery.logs
    assert "logs." in json.dumps(logs_statement["Principal"]["Service"])
    assert "kms:EncryptionContext:aws:logs:arn" in logs_statement["Condition"]["ArnLike"]
    for handler in [f"longstep_functions.{name}.lambda_handler" for name in HANDLERS] + API_HANDLERS:
        key_statements = [s for s in _statements_of(kms_template, handler) if s["Resource"] == {"Fn::GetAtt": [key_id, "Arn"]}]
        assert key_statements, f"{handler} cannot use the key its tables are encrypted with"
        assert not [a for a in _actions(key_statements) if "*" in a], handler


def test_kms_variant_changes_only_encryption(template, kms_template):
    """Same resources but the key and the other opt-ins (no custom resources, nothing moto cannot deploy)."""
    count = lambda t: sorted(r["Type"] for r in t["Resources"].values())  # noqa: E731
    # The role turns the stage's logs on: their access log group comes with it. The state machine's
    # role gets its use of the key in a policy of its own (constructs/execution_key.py).
    opt_ins = ["AWS::KMS::Key", "AWS::SNS::Subscription", "AWS::ApiGateway::Account", "AWS::IAM::Role", "AWS::Logs::LogGroup", "AWS::IAM::Policy"]
    assert count(kms_template) == sorted(count(template) + opt_ins)
    assert not [t for t in count(kms_template) if t.startswith("Custom::")]


def test_cfn_lint_accepts_the_kms_variant(kms_template, tmp_path):
    import subprocess

    from .test_lint import CFN_LINT, CFN_LINT_ERROR_BITS

    path = tmp_path / "kms.template.json"
    path.write_text(json.dumps(kms_template))
    done = subprocess.run([str(CFN_LINT), "--format", "json", str(path)], capture_output=True, text=True, timeout=120)
    assert not done.returncode & CFN_LINT_ERROR_BITS, done.stdout + done.stderr
    assert [f for f in json.loads(done.stdout or "[]") if f["Level"] == "Error"] == []


# -- model providers (the configured variant) -------------------------------------------------------


def _functions_by_handler(template: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    by_handler: dict[str, list[dict[str, Any]]] = {}
    for fn in resources_of_type(template, "AWS::Lambda::Function").values():
        by_handler.setdefault(fn["Properties"]["Handler"], []).append(fn)
    return by_handler


def test_configured_providers_reach_model_turn_only(kms_template):
    from longstep.models.registry import ENV_MODEL_PROVIDERS, parse_providers

    for handler, functions in _functions_by_handler(kms_template).items():
        for fn in functions:
            variables = fn["Properties"].get("Environment", {}).get("Variables", {})
            if handler == "longstep_functions.model_turn.lambda_handler":
                assert set(parse_providers(variables[ENV_MODEL_PROVIDERS])) == set(PROVIDERS)
            else:
                assert ENV_MODEL_PROVIDERS not in variables, handler


def test_only_model_turn_may_read_the_provider_secrets(kms_template):
    readers = {}
    for handler, functions in _functions_by_handler(kms_template).items():
        for fn in functions:
            role = fn["Properties"]["Role"]["Fn::GetAtt"][0]
            statements = [
                s
                for p in resources_of_type(kms_template, "AWS::IAM::Policy").values()
                if {"Ref": role} in p["Properties"]["Roles"]
                for s in p["Properties"]["PolicyDocument"]["Statement"]
            ]
            # The approval pages' link key is the stack's own secret, read by the approval functions.
            secrets = [s for s in statements if "secretsmanager:GetSecretValue" in _actions([s]) and "LinkKeySecret" not in json.dumps(s["Resource"])]
            if secrets:
                readers[handler] = json.dumps([s["Resource"] for s in secrets])
    assert set(readers) == {"longstep_functions.model_turn.lambda_handler"}, readers
    granted = readers["longstep_functions.model_turn.lambda_handler"]
    assert ":secret:longstep/anthropic-??????" in granted  # by name: the random suffix matched
    assert PROVIDERS["openai"]["secret_id"] in granted  # by ARN: exactly


def test_a_bad_provider_is_refused_naming_the_field():
    from longstep_kit.config import ConfigError, load_config

    with pytest.raises(ConfigError, match=r"^longstep\.model_providers\.mine\.factory: "):
        load_config({"model_providers": {"mine": {"base_url": "https://x.example"}}})
    with pytest.raises(ConfigError, match=r"^longstep\.model_providers\.openai\.base_url: "):
        load_config({"model_providers": {"openai": {"base_url": "ftp://x"}}})


# -- operations: alarms, logs, the account-wide role, the key ----------------------------------------


def _alarm_topic(template: dict[str, Any]) -> str:
    (topic,) = [lid for lid in resources_of_type(template, "AWS::SNS::Topic") if "AlarmTopic" in lid]
    return topic


@pytest.mark.parametrize("variant", ["template", "kms_template"])
def test_every_alarm_notifies_the_alarm_topic(request, variant):
    template = request.getfixturevalue(variant)
    topic = _alarm_topic(template)
    alarms = resources_of_type(template, "AWS::CloudWatch::Alarm")
    assert alarms
    for lid, alarm in alarms.items():
        assert alarm["Properties"].get("AlarmActions") == [{"Ref": topic}], lid


def test_alarm_subscribers_come_from_the_configuration(template, kms_template):
    assert not resources_of_type(template, "AWS::SNS::Subscription") or all(
        s["Properties"]["TopicArn"] != {"Ref": _alarm_topic(template)} for s in resources_of_type(template, "AWS::SNS::Subscription").values()
    )
    topic = _alarm_topic(kms_template)
    emails = [
        s["Properties"]["Endpoint"]
        for s in resources_of_type(kms_template, "AWS::SNS::Subscription").values()
        if s["Properties"]["TopicArn"] == {"Ref": topic}
    ]
    assert emails == ["oncall@example.com"]


def test_cloudwatch_may_use_the_key_of_the_encrypted_alarm_topic(kms_template):
    ((key_id, key),) = resources_of_type(kms_template, "AWS::KMS::Key").items()
    topic = resources_of_type(kms_template, "AWS::SNS::Topic")[_alarm_topic(kms_template)]
    assert topic["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    (statement,) = [s for s in key["Properties"]["KeyPolicy"]["Statement"] if s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}]
    assert set(statement["Action"]) == {"kms:Decrypt", "kms:GenerateDataKey*"}


def test_eventbridge_may_use_the_key_of_the_signal_dead_letter_queue(kms_template):
    ((key_id, key),) = resources_of_type(kms_template, "AWS::KMS::Key").items()
    (queue,) = resources_of_type(kms_template, "AWS::SQS::Queue").values()
    assert queue["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    (statement,) = [s for s in key["Properties"]["KeyPolicy"]["Statement"] if s.get("Principal") == {"Service": "events.amazonaws.com"}]
    assert set(statement["Action"]) == {"kms:Decrypt", "kms:GenerateDataKey"}
    assert statement["Condition"] == {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}


def test_the_state_machine_logs_under_vendedlogs_and_nothing_else_is_named(template):
    (machine,) = resources_of_type(template, "AWS::StepFunctions::StateMachine").values()
    (destination,) = machine["Properties"]["LoggingConfiguration"]["Destinations"]
    group = destination["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"][0]
    name = template["Resources"][group]["Properties"]["LogGroupName"]["Fn::Join"][1]
    assert name[0].startswith("/aws/vendedlogs/states/")
    named = [lid for lid, r in resources_of_type(template, "AWS::Logs::LogGroup").items() if "LogGroupName" in r["Properties"]]
    assert named == [group]


def test_the_account_wide_api_gateway_role_is_opt_in(template, kms_template):
    assert resources_of_type(template, "AWS::ApiGateway::Account") == {}
    assert len(resources_of_type(kms_template, "AWS::ApiGateway::Account")) == 1


def test_with_the_cloudwatch_role_the_stage_logs_json_access_lines_without_bodies(kms_template):
    (stage,) = resources_of_type(kms_template, "AWS::ApiGateway::Stage").values()
    props = stage["Properties"]
    settings = props["MethodSettings"][0]
    assert settings["LoggingLevel"] == "ERROR" and settings["DataTraceEnabled"] is False
    assert json.loads(props["AccessLogSetting"]["Format"])["caller"] == "$context.identity.caller"
    assert resources_of_type(kms_template, "AWS::ApiGateway::Account")
