"""Model access as AWS checks it: a cross-Region inference profile needs InvokeModel on the profile
and on the foundation model in whichever Region the request is routed to, the latter checked with
the profile's ARN as ``bedrock:InferenceProfileArn`` (local IAM checks every Region of the
geography, more than any profile routes to today)."""

from __future__ import annotations

from typing import Any

import pytest

from longstep.settings import DEFAULT_MODEL_ID
from longstep_kit.config import ConfigError, load_config
from longstep_kit.local import iam
from longstep_kit.local.iam_actions import ROUTED_REGIONS, bedrock_requests, requests_for
from tests.infra.conftest import resources_of_type

ACCOUNT = "123456789012"
REGION = "us-east-2"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/ModelTurn"


def _model_turn_statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    resolve = iam.template_resolver(
        ref=lambda logical: f"ref:{logical}",
        get_att=lambda logical, attribute: f"arn-of:{logical}",
        pseudo={"AWS::Partition": "aws", "AWS::Region": REGION, "AWS::AccountId": ACCOUNT, "AWS::URLSuffix": "amazonaws.com"},
        mappings=template.get("Mappings", {}),
    )
    (fn,) = [
        f
        for f in resources_of_type(template, "AWS::Lambda::Function").values()
        if f["Properties"]["Handler"] == "longstep_functions.model_turn.lambda_handler"
    ]
    role = fn["Properties"]["Role"]["Fn::GetAtt"][0]
    return [iam.resolve_statement(s, resolve) for s in iam.role_statements(template, role)]


def _converse_denied(statements: list[dict[str, Any]], model_id: str) -> str | None:
    policies = iam.Policies(roles={ROLE: statements}, account=ACCOUNT)
    try:
        iam.check(policies, ROLE, requests_for("bedrock", "Converse", {"modelId": model_id}, REGION, ACCOUNT, None))
    except iam.AccessDeniedError as exc:
        return str(exc)
    return None


def test_a_profile_call_needs_the_model_in_every_region_it_may_route_to_through_the_profile():
    requests = bedrock_requests("bedrock:InvokeModel", "us.anthropic.claude-sonnet-4-6", REGION, ACCOUNT)
    profile = f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/us.anthropic.claude-sonnet-4-6"
    assert (requests[0].resource, requests[0].context) == (profile, {})
    assert {r.resource.split(":")[3] for r in requests[1:]} == set(ROUTED_REGIONS["us"]) | {REGION}
    assert all(r.context == {"bedrock:InferenceProfileArn": profile} for r in requests[1:])
    (direct,) = bedrock_requests("bedrock:InvokeModel", "anthropic.claude-sonnet-4-6", REGION, ACCOUNT)
    assert (direct.resource, direct.context) == (f"arn:aws:bedrock:{REGION}::foundation-model/anthropic.claude-sonnet-4-6", {})


def test_model_turn_may_converse_with_the_default_profile_wherever_it_routes(template):
    assert _converse_denied(_model_turn_statements(template), DEFAULT_MODEL_ID) is None


def test_model_turn_may_not_invoke_a_model_the_deployment_does_not_name(template):
    denied = _converse_denied(_model_turn_statements(template), "us.anthropic.claude-opus-4-6-v1")
    assert denied is not None and "bedrock:InvokeModel" in denied


def test_a_region_only_grant_is_refused_for_a_profile():
    # What the stack granted before: foundation models of the stack's own Region, any profile.
    region_only = [
        {
            "Effect": "Allow",
            "Action": "bedrock:InvokeModel",
            "Resource": [
                f"arn:aws:bedrock:{REGION}::foundation-model/*",
                f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/*",
            ],
        },
    ]
    denied = _converse_denied(region_only, DEFAULT_MODEL_ID)
    assert denied is not None and "foundation-model/anthropic.claude-sonnet-4-6" in denied


def test_configuration_needs_no_destination_regions_for_any_profile():
    assert load_config({"bedrock_models": ["eu.example.model-v1"]}).bedrock_models == ["eu.example.model-v1"]
    with pytest.raises(ConfigError, match=r"longstep\.bedrock_destinations: Extra inputs"):
        load_config({"bedrock_destinations": {"eu.example.model-v1": ["eu-west-1"]}})


def test_a_region_by_region_grant_misses_a_region_aws_adds():
    # What the stack granted before: the profile and the model in the three Regions listed then.
    listed = [
        {
            "Effect": "Allow",
            "Action": "bedrock:InvokeModel",
            "Resource": [
                f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/{DEFAULT_MODEL_ID}",
                *(f"arn:aws:bedrock:{r}::foundation-model/anthropic.claude-sonnet-4-6" for r in ("us-east-1", "us-east-2", "us-west-2")),
            ],
        }
    ]
    denied = _converse_denied(listed, DEFAULT_MODEL_ID)
    assert denied is not None and "us-west-1::foundation-model" in denied


def test_model_turn_may_not_call_its_model_directly_or_through_another_profile(template):
    statements = _model_turn_statements(template)
    model = f"arn:aws:bedrock:us-west-1::foundation-model/{DEFAULT_MODEL_ID.split('.', 1)[1]}"
    policies = iam.Policies(roles={ROLE: statements}, account=ACCOUNT)
    granted = f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/{DEFAULT_MODEL_ID}"
    assert policies.decide(ROLE, "bedrock:InvokeModel", model, {"bedrock:InferenceProfileArn": granted}).allowed
    assert not policies.decide(ROLE, "bedrock:InvokeModel", model, {}).allowed  # no profile: no grant
    other = f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/global.{DEFAULT_MODEL_ID.split('.', 1)[1]}"
    assert not policies.decide(ROLE, "bedrock:InvokeModel", model, {"bedrock:InferenceProfileArn": other}).allowed


def test_the_template_grants_the_model_in_any_region_on_the_profile_condition(template):
    conditioned = [s for s in _model_turn_statements(template) if "Condition" in s and s["Action"] == "bedrock:InvokeModel"]
    assert conditioned, "ModelTurn's role has a conditioned InvokeModel statement"
    for statement in conditioned:
        assert statement["Resource"].startswith("arn:aws:bedrock:*::foundation-model/")
        (profile,) = statement["Condition"]["ArnLike"].values()
        assert set(statement["Condition"]["ArnLike"]) == {"bedrock:InferenceProfileArn"}
        assert profile.startswith(f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/")
