"""The model the functions call, valid in the stack's Region (``longstep_kit.model_regions``).

With the Region known at synth the profile is chosen (the default model) or checked (a model the
user named) there, and a pairing that cannot work is refused with one line. In an
environment-agnostic stack the Region is ``AWS::Region``, known at deploy time only: the default
model's profile is a ``Fn::FindInMap`` on a mapping Region -> profile
(https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/intrinsic-function-reference-findinmap.html),
and a template rule asserts the Region is one the mapping (or a named model's geography) covers.
CloudFormation evaluates ``Rules`` before it creates or updates any resource and refuses the
operation when an assertion is false
(https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/rules-section-structure.html);
rules on ``AWS::Region`` are how AWS's own samples refuse a Region
(https://github.com/aws-samples/amazon-cloudfront-secure-static-site/pull/50).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from aws_cdk import Aws, CfnMapping, CfnRule, CfnRuleAssertion, Fn, Stack, Token
from constructs import Construct

from longstep_kit.bedrock_access import split_profile
from longstep_kit.model_regions import PROFILES, allowed_regions, check_pairing, mapping_of, profile_for, region_profiles

PROFILE_KEY = "Profile"


@dataclass(frozen=True)
class ModelChoice:
    """The model id the functions call, and how it was reached.

    Attributes:
        model_id: the id (a deploy-time ``Fn::FindInMap`` token in an environment-agnostic stack).
        foundation_model: the foundation model behind a deploy-time id (None: ``model_id`` is literal).
    """

    model_id: str
    foundation_model: str | None = None


def choose_models(scope: Construct, model_id: str, bedrock_models: Sequence[str], *, named: bool) -> ModelChoice:
    """The default model for the stack's Region, each named model checked against it.

    Args:
        model_id: the configured model (``longstep.settings.DEFAULT_MODEL_ID`` unless named).
        bedrock_models: the other models runs may name (checked, never replaced).
        named: the user named ``model_id`` (checked as given); else it is the default, whose
            foundation model is called through the profile the Region takes.

    Raises:
        BedrockAccessError: with the Region known, a model that cannot be called from it.
    """
    stack = Stack.of(scope)
    region = None if Token.is_unresolved(stack.region) else stack.region
    base = split_profile(model_id)[1]
    choose = not named and base in PROFILES
    checked = ([] if choose else [model_id]) + [m for m in bedrock_models if m != model_id]
    if region is not None:
        for model in checked:
            check_pairing(model, region)
        return ModelChoice(profile_for(base, region) if choose else model_id)
    assertions = []
    for model in dict.fromkeys(checked):
        regions = allowed_regions(model)
        if regions is not None:
            assertions.append(
                _assertion(regions, f"longstep: {model} cannot be called from this Region (its source Regions are {', '.join(regions)})")
            )
    choice = ModelChoice(model_id)
    if choose:
        profiles = region_profiles(base)
        mapping = CfnMapping(scope, "ModelProfiles", mapping=mapping_of(profiles, PROFILE_KEY))
        assertions.append(
            _assertion(
                list(profiles),
                f"longstep: no inference profile of {base} is known to accept calls from this Region; name one in model_id (docs/deploy.md)",
            )
        )
        choice = ModelChoice(mapping.find_in_map(Aws.REGION, PROFILE_KEY), foundation_model=base)
    if assertions:
        CfnRule(scope, "ModelRegion", assertions=assertions)
    return choice


def _assertion(regions: Sequence[str], description: str) -> CfnRuleAssertion:
    return CfnRuleAssertion(assert_=Fn.condition_contains(list(regions), Aws.REGION), assert_description=description)
