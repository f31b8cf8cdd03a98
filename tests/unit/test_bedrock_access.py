"""The IAM grants for bedrock:InvokeModel: the profile, and its foundation model in any Region
for calls through that profile only (no list of destination Regions to go stale)."""

import pytest

from longstep.settings import DEFAULT_MODEL_ID
from longstep_kit.bedrock_access import BedrockAccessError, ModelGrant, invoke_model_grants, split_profile
from longstep_kit.model_regions import check_pairing

PROFILE = "arn:aws:bedrock:us-east-2:123456789012:inference-profile/us.anthropic.claude-sonnet-4-6"


def test_the_default_model_is_a_cross_region_profile():
    assert split_profile(DEFAULT_MODEL_ID) == ("us", "anthropic.claude-sonnet-4-6")


def test_a_profile_grants_itself_and_the_model_in_any_region_through_it_only():
    grants = invoke_model_grants("us.anthropic.claude-sonnet-4-6", region="us-east-2", account="123456789012")
    assert grants == [
        ModelGrant((PROFILE,)),
        ModelGrant(("arn:aws:bedrock:*::foundation-model/anthropic.claude-sonnet-4-6",), through_profile=PROFILE),
    ]
    assert grants[0].conditions() is None
    assert grants[1].conditions() == {"ArnLike": {"bedrock:InferenceProfileArn": PROFILE}}


def test_any_geography_needs_no_destination_list():
    # An EU profile the kit has never heard of: granted the same way, nothing to configure.
    grants = invoke_model_grants("eu.example.new-model-v1:0", region="eu-west-1", account="1", partition="aws")
    assert grants[1].resources == ("arn:aws:bedrock:*::foundation-model/example.new-model-v1:0",)
    assert grants[1].through_profile == "arn:aws:bedrock:eu-west-1:1:inference-profile/eu.example.new-model-v1:0"


def test_a_plain_model_id_grants_the_model_in_the_region_without_a_condition():
    assert invoke_model_grants("anthropic.claude-sonnet-4-6", region="eu-west-1", account="1") == [
        ModelGrant(("arn:aws:bedrock:eu-west-1::foundation-model/anthropic.claude-sonnet-4-6",))
    ]


def test_a_profile_called_outside_its_geography_is_refused():
    with pytest.raises(BedrockAccessError, match="^model_id: .*cannot be called from eu-west-1"):
        check_pairing("us.anthropic.claude-sonnet-4-6", "eu-west-1")
    check_pairing("ca.example.model-v1", "ca-central-1")
    with pytest.raises(BedrockAccessError, match="ca-central-1"):
        check_pairing("ca.example.model-v1", "us-east-1")


def test_a_profile_chosen_at_deploy_time_is_granted_on_the_model_it_names():
    token = "${Token[TOKEN.42]}"  # a Fn::FindInMap: its text holds dots, so it is not split
    grants = invoke_model_grants(token, region="${Token[AWS.Region.7]}", account="1", foundation_model="anthropic.claude-sonnet-4-6")
    assert grants[0].resources == (f"arn:aws:bedrock:${{Token[AWS.Region.7]}}:1:inference-profile/{token}",)
    assert grants[1].resources == ("arn:aws:bedrock:*::foundation-model/anthropic.claude-sonnet-4-6",)


def test_a_global_profile_is_granted_like_any_other():
    grants = invoke_model_grants("global.anthropic.claude-sonnet-4-6", region="ap-south-1", account="1", partition="aws")
    assert grants[1].resources == ("arn:aws:bedrock:*::foundation-model/anthropic.claude-sonnet-4-6",)
    assert grants[1].through_profile == "arn:aws:bedrock:ap-south-1:1:inference-profile/global.anthropic.claude-sonnet-4-6"
