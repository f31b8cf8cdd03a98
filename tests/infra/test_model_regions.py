"""The model matches the Region (issue 37): the default model is called through a profile the
stack's Region may call, chosen at synth when the Region is known and at deploy time (a mapping on
``AWS::Region``, guarded by a template rule) when it is not; a named model that cannot be called
from the Region is refused before deploy with one line."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest

from longstep import settings
from longstep_kit.bedrock_access import BedrockAccessError
from longstep_kit.constructs.model_profile import choose_models
from longstep_kit.model_regions import GEOGRAPHIES, check_pairing, profile_for, region_profiles

from .conftest import REPO_ROOT, resources_of_type

ACCOUNT = "123456789012"
BASE = settings.DEFAULT_MODEL_ID.split(".", 1)[1]
MODEL_TURN = "longstep_functions.model_turn.lambda_handler"


def _context(overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    import json

    context = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]
    context["longstep"] = {**context["longstep"], **(overrides or {})}
    return context


def _synth(tmp_path_factory, region: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    from longstep_kit.app import build_app

    app = build_app(
        REPO_ROOT, context=_context(overrides), outdir=str(tmp_path_factory.mktemp("region")), env=cdk.Environment(account=ACCOUNT, region=region)
    )
    (stack,) = [s for s in app.node.children if isinstance(s, cdk.Stack)]
    return app.synth().get_stack_by_name(stack.stack_name).template


def _model_turn(template: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    (fn,) = [f for f in resources_of_type(template, "AWS::Lambda::Function").values() if f["Properties"]["Handler"] == MODEL_TURN]
    role = fn["Properties"]["Role"]["Fn::GetAtt"][0]
    statements = [
        s
        for p in resources_of_type(template, "AWS::IAM::Policy").values()
        if {"Ref": role} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if "bedrock:InvokeModel" in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
    ]
    return fn["Properties"]["Environment"]["Variables"][settings.ENV_MODEL_ID], statements


def _arns(statements: list[dict[str, Any]]) -> set[str]:
    """Resources rendered with the partition as ``aws`` (the one intrinsic a pinned stack keeps)."""

    def text(node: Any) -> str:
        if isinstance(node, str):
            return node
        if node == {"Ref": "AWS::Partition"}:
            return "aws"
        separator, parts = node["Fn::Join"]
        return separator.join(text(p) for p in parts)

    return {text(r) for s in statements for r in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])}


@pytest.mark.parametrize(("region", "profile"), [("eu-west-1", f"eu.{BASE}"), ("ap-southeast-2", f"au.{BASE}")])
def test_a_pinned_stack_calls_the_default_model_through_its_regions_profile(tmp_path_factory, region, profile):
    template = _synth(tmp_path_factory, region)
    model_id, statements = _model_turn(template)
    assert model_id == profile
    profile_arn = f"arn:aws:bedrock:{region}:{ACCOUNT}:inference-profile/{profile}"
    assert _arns(statements) == {profile_arn, f"arn:aws:bedrock:*::foundation-model/{BASE}"}
    (conditioned,) = [s for s in statements if "Condition" in s]
    assert conditioned["Condition"]["ArnLike"]["bedrock:InferenceProfileArn"] in (
        profile_arn,
        {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, f":bedrock:{region}:{ACCOUNT}:inference-profile/{profile}"]]},
    )
    assert "ModelProfiles" not in template.get("Mappings", {}) and "ModelRegion" not in template.get("Rules", {})


def test_a_named_profile_of_another_geography_is_refused_at_synth_with_one_line(tmp_path_factory):
    from longstep_kit.app import build_app

    with pytest.raises(BedrockAccessError) as caught:
        build_app(
            REPO_ROOT,
            context=_context({"model_id": f"eu.{BASE}"}),
            outdir=str(tmp_path_factory.mktemp("refused")),
            env=cdk.Environment(account=ACCOUNT, region="us-east-1"),
        )
    message = str(caught.value)
    assert "\n" not in message and f"eu.{BASE}" in message and "us-east-1" in message


def test_the_agnostic_template_maps_each_region_to_its_profile_and_refuses_the_others(template):
    profiles = {region: row["Profile"] for region, row in template["Mappings"]["ModelProfiles"].items()}
    assert profiles["us-east-1"] == settings.DEFAULT_MODEL_ID
    assert (profiles["eu-west-1"], profiles["ap-southeast-2"], profiles["ap-northeast-1"]) == (f"eu.{BASE}", f"au.{BASE}", f"jp.{BASE}")
    assert profiles["ap-south-1"] == f"global.{BASE}"
    (assertion,) = template["Rules"]["ModelRegion"]["Assertions"]
    assert assertion["Assert"] == {"Fn::Contains": [sorted(profiles), {"Ref": "AWS::Region"}]}
    assert "\n" not in assertion["AssertDescription"] and BASE in assertion["AssertDescription"]


def _bare(region: str | None) -> cdk.Stack:
    env = cdk.Environment(account=ACCOUNT, region=region) if region else None
    return cdk.Stack(cdk.App(), "Bare", env=env)


def test_an_agnostic_stack_asserts_the_region_of_each_named_geographic_model():
    stack = _bare(None)
    choice = choose_models(stack, f"eu.{BASE}", [f"global.{BASE}", "anthropic.claude-3-haiku-20240307-v1:0"], named=True)
    assert choice.model_id == f"eu.{BASE}" and choice.foundation_model is None
    template = cdk.assertions.Template.from_stack(stack).to_json()
    assert "Mappings" not in template
    (assertion,) = template["Rules"]["ModelRegion"]["Assertions"]
    assert assertion["Assert"] == {"Fn::Contains": [list(GEOGRAPHIES["eu"]), {"Ref": "AWS::Region"}]}
    assert f"eu.{BASE}" in assertion["AssertDescription"]


def test_the_default_model_resolves_in_every_mapped_region_and_named_ones_are_checked():
    assert profile_for(BASE, "us-west-2") == f"us.{BASE}" and profile_for(BASE, "eu-central-1") == f"eu.{BASE}"
    assert profile_for(BASE, "ca-central-1") == f"global.{BASE}"
    with pytest.raises(BedrockAccessError, match="af-south-1"):
        profile_for(BASE, "af-south-1")
    for region, profile in region_profiles(BASE).items():
        check_pairing(profile, region)  # every profile the mapping chooses passes the named-model check
    with pytest.raises(BedrockAccessError, match=f"from eu-west-1 call eu.{BASE}"):
        check_pairing(settings.DEFAULT_MODEL_ID, "eu-west-1")
    check_pairing(f"global.{BASE}", "me-south-1")  # not known to fail: let through
    check_pairing("anthropic.claude-3-haiku-20240307-v1:0", "eu-west-1")
    with pytest.raises(BedrockAccessError):
        choose_models(_bare("ap-southeast-2"), settings.DEFAULT_MODEL_ID, [], named=True)
    assert choose_models(_bare("ap-southeast-2"), settings.DEFAULT_MODEL_ID, [], named=False).model_id == f"au.{BASE}"
