"""The IAM resources for bedrock:InvokeModel: the profile and the foundation model in each destination Region."""

import pytest

from longstep.settings import DEFAULT_MODEL_ID
from longstep_kit.bedrock_access import PROFILE_DESTINATIONS, BedrockAccessError, invoke_model_resources, split_profile


def test_the_default_model_is_a_known_cross_region_profile():
    assert split_profile(DEFAULT_MODEL_ID)[0] == "us"
    assert DEFAULT_MODEL_ID in PROFILE_DESTINATIONS


def test_a_profile_grants_itself_and_the_model_in_every_destination():
    resources = invoke_model_resources("us.anthropic.claude-sonnet-4-6", region="us-east-2", account="123456789012")
    assert resources == [
        "arn:aws:bedrock:us-east-2:123456789012:inference-profile/us.anthropic.claude-sonnet-4-6",
        "arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-sonnet-4-6",
        "arn:aws:bedrock:us-east-2::foundation-model/anthropic.claude-sonnet-4-6",
        "arn:aws:bedrock:us-west-2::foundation-model/anthropic.claude-sonnet-4-6",
    ]


def test_a_plain_model_id_grants_the_model_in_the_region():
    assert invoke_model_resources("anthropic.claude-sonnet-4-6", region="eu-west-1", account="1") == [
        "arn:aws:bedrock:eu-west-1::foundation-model/anthropic.claude-sonnet-4-6"
    ]


def test_an_unknown_profile_needs_its_destinations():
    with pytest.raises(BedrockAccessError, match="model_id: no destination Regions"):
        invoke_model_resources("eu.anthropic.claude-sonnet-4-6", region="eu-west-1", account="1")
    resources = invoke_model_resources("eu.anthropic.claude-sonnet-4-6", region="eu-west-1", account="1", destinations=["eu-west-3", "eu-west-1"])
    assert resources[1:] == [
        "arn:aws:bedrock:eu-west-1::foundation-model/anthropic.claude-sonnet-4-6",
        "arn:aws:bedrock:eu-west-3::foundation-model/anthropic.claude-sonnet-4-6",
    ]


def test_a_profile_called_outside_its_geography_is_refused():
    with pytest.raises(BedrockAccessError, match="cannot be called from eu-west-1"):
        invoke_model_resources("us.anthropic.claude-sonnet-4-6", region="eu-west-1", account="1")


def test_a_global_profile_grants_the_model_in_any_region():
    assert (
        invoke_model_resources("global.anthropic.claude-sonnet-4-6", region="ap-south-1", account="1", partition="aws")[1]
        == "arn:aws:bedrock:*::foundation-model/anthropic.claude-sonnet-4-6"
    )
