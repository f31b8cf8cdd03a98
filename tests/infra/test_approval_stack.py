"""The approval API, its topic and the signal rule in the synthesized template (the session's synth)."""

from __future__ import annotations

import json
from typing import Any

from longstep_kit.config import DeploymentConfig, load_config
from longstep_kit.constructs.approval_api import ROUTES, STAGE_NAME
from longstep_kit.constructs.approval_pages import PAGE_ROUTES
from longstep import settings as env
from longstep.humans.api import SIGNAL_DETAIL_TYPE
from longstep_kit.constructs.signal_bus import SIGNAL_SOURCE

from .conftest import REPO_ROOT, resources_of_type


def _config() -> DeploymentConfig:
    return load_config(json.loads((REPO_ROOT / "cdk.json").read_text())["context"]["longstep"])


def _one(template: dict[str, Any], type_name: str) -> tuple[str, dict[str, Any]]:
    (found,) = resources_of_type(template, type_name).items()
    return found


def _function(template: dict[str, Any], handler: str) -> tuple[str, dict[str, Any]]:
    (found,) = [(lid, f) for lid, f in resources_of_type(template, "AWS::Lambda::Function").items() if f["Properties"]["Handler"] == handler]
    return found


def _path_of(template: dict[str, Any], resource_id: Any) -> tuple[str, ...]:
    """The path parts of an API Gateway resource, from the root."""
    parts: list[str] = []
    while isinstance(resource_id, dict) and "Ref" in resource_id:
        resource = template["Resources"][resource_id["Ref"]]["Properties"]
        parts.insert(0, resource["PathPart"])
        resource_id = resource["ParentId"]
    return tuple(parts)


def test_every_method_uses_iam_authorization_and_the_routes_are_the_documented_ones(template):
    methods = resources_of_type(template, "AWS::ApiGateway::Method")
    assert methods
    routes: dict[tuple[str, ...], list[str]] = {}
    pages: dict[tuple[str, ...], list[str]] = {}
    for lid, method in methods.items():
        props = method["Properties"]
        path = _path_of(template, props["ResourceId"])
        assert props["Integration"]["Type"] == "AWS_PROXY", lid
        if path in PAGE_ROUTES:  # the approval pages: the signed link is the credential (test_approval_pages.py)
            assert props["AuthorizationType"] == "NONE", lid
            pages.setdefault(path, []).append(props["HttpMethod"])
            continue
        assert props["AuthorizationType"] == "AWS_IAM", lid
        assert "RequestValidatorId" in props, lid
        routes.setdefault(path, []).append(props["HttpMethod"])
    assert routes == ROUTES
    assert {path: sorted(m) for path, m in pages.items()} == PAGE_ROUTES


def test_the_stage_is_traced_and_throttled_and_has_no_logs_by_default(template):
    """A fresh account has no API Gateway CloudWatch role, and API Gateway refuses a stage with logs
    before it has one: by default the stage asks for none (the logged variant: test_nag.py)."""
    _, stage = _one(template, "AWS::ApiGateway::Stage")
    props = stage["Properties"]
    assert props["StageName"] == STAGE_NAME and props["TracingEnabled"] is True
    settings, *page_methods = props["MethodSettings"]  # the stage's, then each page method's throttle
    assert {(m["ResourcePath"], m["HttpMethod"]) for m in page_methods} == {
        ("/~1" + "~1".join(path), method) for path, methods in PAGE_ROUTES.items() for method in methods
    }
    assert all(0 < m["ThrottlingRateLimit"] < settings["ThrottlingRateLimit"] for m in page_methods)
    assert "LoggingLevel" not in settings and settings["DataTraceEnabled"] is False
    assert settings["ThrottlingRateLimit"] > 0 and settings["ThrottlingBurstLimit"] > 0
    assert "AccessLogSetting" not in props
    assert not resources_of_type(template, "AWS::ApiGateway::Account")


def test_request_approval_is_told_the_table_topic_timeout_and_api(template):
    (table_id,) = [lid for lid in resources_of_type(template, "AWS::DynamoDB::Table") if lid.startswith("StorageApprovals")]
    ((topic_id, topic),) = [(lid, t) for lid, t in resources_of_type(template, "AWS::SNS::Topic").items() if lid.startswith("ApprovalNotifications")]
    api_id, _ = _one(template, "AWS::ApiGateway::RestApi")
    _, fn = _function(template, "longstep_functions.request_approval.lambda_handler")
    variables = fn["Properties"]["Environment"]["Variables"]
    assert variables[env.ENV_APPROVALS_TABLE] == {"Ref": table_id}
    assert variables[env.ENV_APPROVAL_TOPIC_ARN] == {"Ref": topic_id}
    assert variables[env.ENV_APPROVAL_TIMEOUT_SECONDS] == str(_config().approval_timeout_hours * 3600)
    assert {"Ref": api_id} in variables[env.ENV_APPROVAL_API_URL]["Fn::Join"][1]
    assert template["Outputs"]["ApprovalApiUrl"]["Value"] == variables[env.ENV_APPROVAL_API_URL]
    _, call_tool = _function(template, "longstep_functions.call_tool.lambda_handler")
    assert call_tool["Properties"]["Environment"]["Variables"][env.ENV_APPROVALS_TABLE] == {"Ref": table_id}
    # The topic is encrypted and refuses plain HTTP; by default nobody is subscribed.
    assert json.dumps(topic["Properties"]["KmsMasterKeyId"]).endswith('":alias/aws/sns"]]}')  # the AWS-managed key
    (policy,) = [p for p in resources_of_type(template, "AWS::SNS::TopicPolicy").values() if {"Ref": topic_id} in p["Properties"]["Topics"]]
    assert any(
        s["Effect"] == "Deny" and "aws:SecureTransport" in json.dumps(s.get("Condition")) for s in policy["Properties"]["PolicyDocument"]["Statement"]
    )
    assert _config().approval_email is None and resources_of_type(template, "AWS::SNS::Subscription") == {}


def test_signal_events_invoke_the_signal_handler_with_a_dead_letter_queue(template):
    _, rule = _one(template, "AWS::Events::Rule")
    assert rule["Properties"]["EventPattern"] == {"source": [SIGNAL_SOURCE], "detail-type": [SIGNAL_DETAIL_TYPE]}
    (target,) = rule["Properties"]["Targets"]
    fn_id, fn = _function(template, "longstep_functions.approval_api.signal_handler")
    queue_id, _ = _one(template, "AWS::SQS::Queue")
    assert target["Arn"] == {"Fn::GetAtt": [fn_id, "Arn"]}
    assert target["DeadLetterConfig"]["Arn"] == {"Fn::GetAtt": [queue_id, "Arn"]}
    assert fn["Properties"]["DeadLetterConfig"]["TargetArn"] == {"Fn::GetAtt": [queue_id, "Arn"]}
    (permission,) = [
        p for p in resources_of_type(template, "AWS::Lambda::Permission").values() if p["Properties"]["Principal"] == "events.amazonaws.com"
    ]
    assert permission["Properties"]["FunctionName"] == {"Fn::GetAtt": [fn_id, "Arn"]}


def test_the_api_function_is_invoked_by_this_api_only(template):
    fn_id, _ = _function(template, "longstep_functions.approval_api.lambda_handler")
    api_id, _ = _one(template, "AWS::ApiGateway::RestApi")
    permissions = [
        p["Properties"]
        for p in resources_of_type(template, "AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "apigateway.amazonaws.com"
    ]
    assert len(permissions) == sum(len(m) for m in ROUTES.values()) + sum(len(m) for m in PAGE_ROUTES.values())
    for permission in permissions:
        assert permission["FunctionName"] == {"Fn::GetAtt": [fn_id, "Arn"]}
        assert {"Ref": api_id} in permission["SourceArn"]["Fn::Join"][1]


def test_the_link_key_is_a_generated_rotated_secret_the_pages_and_notifiers_read(template):
    secret_id, secret = _one(template, "AWS::SecretsManager::Secret")
    assert secret["Properties"]["GenerateSecretString"]["PasswordLength"] >= 64
    _, schedule = _one(template, "AWS::SecretsManager::RotationSchedule")
    assert schedule["Properties"]["SecretId"] == {"Ref": secret_id}
    assert schedule["Properties"]["RotationRules"]["ScheduleExpression"] == f"rate({_config().link_key_rotation_days} days)"
    rotation_id, _ = _function(template, "longstep_functions.rotate_link_key.lambda_handler")
    assert schedule["Properties"]["RotationLambdaARN"] == {"Fn::GetAtt": [rotation_id, "Arn"]}
    # ModelTurn notifies a budget ask (longstep.humans.budget_asks) as RequestApproval does a request.
    for handler in ("approval_api.lambda_handler", "request_approval.lambda_handler", "escalate.lambda_handler", "model_turn.lambda_handler"):
        fn_id, fn = _function(template, f"longstep_functions.{handler}")
        assert fn["Properties"]["Environment"]["Variables"]["LONGSTEP_LINK_KEY_SECRET"] == {"Ref": secret_id}, handler
        role = fn["Properties"]["Role"]["Fn::GetAtt"][0]
        statements = [
            s
            for p in resources_of_type(template, "AWS::IAM::Policy").values()
            if {"Ref": role} in p["Properties"]["Roles"]
            for s in p["Properties"]["PolicyDocument"]["Statement"]
        ]
        assert any("secretsmanager:GetSecretValue" in s["Action"] and s["Resource"] == {"Ref": secret_id} for s in statements), handler
