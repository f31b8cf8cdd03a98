"""Model access as AWS checks it: a cross-Region inference profile needs InvokeModel on the profile
and on the foundation model in every Region it may route to (local IAM checks all of them)."""

from __future__ import annotations

from typing import Any

import pytest

from longstep.settings import DEFAULT_MODEL_ID
from longstep_kit.config import ConfigError, load_config
from longstep_kit.local import iam
from longstep_kit.local.iam_actions import bedrock_routed_arns, requests_for
from tests.infra.conftest import resources_of_type

ACCOUNT = "123456789012"
REGION = "us-east-2"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/ModelTurn"


def _model_turn_statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    resolve = iam.template_resolver(
        ref=lambda logical: f"ref:{logical}",
        get_att=lambda logical, attribute: f"arn-of:{logical}",
        pseudo={"AWS::Partition": "aws", "AWS::Region": REGION, "AWS::AccountId": ACCOUNT, "AWS::URLSuffix": "amazonaws.com"},
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


def test_a_profile_call_needs_the_model_in_every_destination_region():
    arns = bedrock_routed_arns("us.anthropic.claude-sonnet-4-6", REGION, ACCOUNT)
    assert arns[0] == f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/us.anthropic.claude-sonnet-4-6"
    assert {a.split(":")[3] for a in arns[1:]} == {"us-east-1", "us-east-2", "us-west-2"}
    assert bedrock_routed_arns("anthropic.claude-sonnet-4-6", REGION, ACCOUNT) == [
        f"arn:aws:bedrock:{REGION}::foundation-model/anthropic.claude-sonnet-4-6"
    ]


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


def test_configuration_refuses_a_profile_whose_regions_are_unknown():
    with pytest.raises(ConfigError, match=r"^longstep\.bedrock_models\.0: .*eu\.example\.model"):
        load_config({"bedrock_models": ["eu.example.model-v1"]})
    config = load_config({"bedrock_models": ["eu.example.model-v1"], "bedrock_destinations": {"eu.example.model-v1": ["eu-west-1"]}})
    assert config.bedrock_destinations == {"eu.example.model-v1": ["eu-west-1"]}
