"""Which inference profile a model is called through from a Region, and which pairings cannot work.

A system-defined cross-Region inference profile is called from one of its *source* Regions only
(https://docs.aws.amazon.com/bedrock/latest/userguide/inference-profiles-support.html: "Source
Region – The Region from which you make the API request that specifies the inference profile").
Its id is the foundation model's id behind a geography prefix (``us.``, ``eu.``, ``apac.``, ``jp.``,
``au.``, ``ca.``, ``global.``), and the geographic ones keep requests inside their geography
(https://docs.aws.amazon.com/bedrock/latest/userguide/geographic-cross-region-inference.html);
the global profile may be called from the commercial Regions AWS lists for it and routes anywhere
(https://docs.aws.amazon.com/bedrock/latest/userguide/global-cross-region-inference.html).

``GEOGRAPHIES`` holds the Regions each geography's profiles are called from: the lists of the
CDK's ``CrossRegionInferenceProfileRegion`` (aws-cdk-lib's bedrock-alpha, which cites the page
above). ``PROFILES`` holds the profiles Longstep chooses among by itself, the default model's:
Claude Sonnet 4.6 has ``us.``, ``eu.``, ``jp.``, ``au.`` and ``global.`` profiles. AWS now lists a
model's profile ids on the model's own page ("models at a glance", linked from the page above),
which was not in reach when this table was written; the ids were read off AWS's blog on global
inference for Sonnet 4.6 from South and South-East Asia
(https://aws.amazon.com/blogs/machine-learning/global-cross-region-inference-for-latest-anthropic-claude-opus-sonnet-and-haiku-models-on-amazon-bedrock-in-thailand-malaysia-singapore-indonesia-and-taiwan)
and from India (ap-south-1, ap-south-2), and public configurations naming ``jp.`` and ``au.``
ids; the global profile's other source Regions (Seoul, Canada, Sao Paulo) follow AWS's statement
that the global profile serves the commercial Regions, unverified Region by Region.
AWS adds Regions over time: a Region missing here is refused at synth or at deploy with a line
that says to name a model explicitly (``model_id``, e.g. a ``global.`` id, which is not checked).
``aws bedrock get-inference-profile`` in the Region is the live answer.
"""

from __future__ import annotations

from typing import Mapping

from longstep_kit.bedrock_access import BedrockAccessError, split_profile

GLOBAL = "global"

# Source Regions of each geography's profiles.
GEOGRAPHIES: dict[str, tuple[str, ...]] = {
    "us": ("us-east-1", "us-east-2", "us-west-1", "us-west-2"),
    "eu": ("eu-central-1", "eu-central-2", "eu-north-1", "eu-south-1", "eu-south-2", "eu-west-1", "eu-west-2", "eu-west-3"),
    "apac": (
        "ap-east-2",
        "ap-northeast-1",
        "ap-northeast-2",
        "ap-northeast-3",
        "ap-south-1",
        "ap-south-2",
        "ap-southeast-1",
        "ap-southeast-2",
        "ap-southeast-3",
        "ap-southeast-4",
        "ap-southeast-5",
        "ap-southeast-7",
        "me-central-1",
    ),
    "jp": ("ap-northeast-1", "ap-northeast-3"),
    "au": ("ap-southeast-2", "ap-southeast-4"),
    "ca": ("ca-central-1", "ca-west-1"),
    "us-gov": ("us-gov-east-1", "us-gov-west-1"),
}

# The Regions the default model's global profile is called from beyond its geographic ones.
_SONNET_4_6_GLOBAL_ONLY = (
    "ap-east-2",
    "ap-northeast-2",
    "ap-south-1",
    "ap-south-2",
    "ap-southeast-1",
    "ap-southeast-3",
    "ap-southeast-5",
    "ap-southeast-7",
    "ca-central-1",
    "sa-east-1",
)

# Foundation model -> its profiles, in the order they are preferred: a geographic profile keeps
# requests (and data) in the stack's geography, as the default ``us.`` profile always did; the
# global profile serves the Regions no geography of the model covers.
PROFILES: dict[str, dict[str, tuple[str, ...]]] = {
    "anthropic.claude-sonnet-4-6": {
        "us": GEOGRAPHIES["us"],
        "eu": GEOGRAPHIES["eu"],
        "jp": GEOGRAPHIES["jp"],
        "au": GEOGRAPHIES["au"],
        GLOBAL: GEOGRAPHIES["us"] + GEOGRAPHIES["eu"] + GEOGRAPHIES["jp"] + GEOGRAPHIES["au"] + _SONNET_4_6_GLOBAL_ONLY,
    },
}


def region_profiles(foundation_model: str) -> dict[str, str]:
    """Region -> the profile id the model is called through from there, every Region known for it."""
    chosen: dict[str, str] = {}
    for prefix, regions in PROFILES.get(foundation_model, {}).items():
        for region in regions:
            chosen.setdefault(region, f"{prefix}.{foundation_model}")
    return dict(sorted(chosen.items()))


def profile_for(foundation_model: str, region: str) -> str:
    """The profile ``foundation_model`` is called through from ``region``.

    Raises:
        BedrockAccessError: no profile of the model is known to accept calls from ``region``.
    """
    found = region_profiles(foundation_model).get(region)
    if found is None:
        raise BedrockAccessError(
            f"model_id: no inference profile of {foundation_model} is known to accept calls from {region}; "
            "name one in model_id (docs/deploy.md, Regions and models)"
        )
    return found


def check_pairing(model_id: str, region: str) -> None:
    """Refuse a pairing known not to work: a geography's profile called from outside the geography.

    A global profile, a plain foundation model id or an unknown prefix is let through: what the
    Region serves of them is not known here.

    Raises:
        BedrockAccessError: one line naming the model and the Region.
    """
    sources = allowed_regions(model_id)
    if sources is None or region in sources:
        return
    hint = ""
    base = split_profile(model_id)[1]
    if base in PROFILES and region in region_profiles(base):
        hint = f"; from {region} call {profile_for(base, region)}"
    raise BedrockAccessError(f"model_id: {model_id} cannot be called from {region} (its source Regions are {', '.join(sources)}){hint}")


def allowed_regions(model_id: str) -> tuple[str, ...] | None:
    """The Regions ``model_id`` may be called from: its geography's; None when not known here."""
    prefix, _ = split_profile(model_id)
    return None if prefix is None or prefix == GLOBAL else GEOGRAPHIES.get(prefix)


def mapping_of(profiles: Mapping[str, str], key: str) -> dict[str, dict[str, str]]:
    """``{Region: {key: profile}}``: the shape of a CloudFormation mapping looked up by Region."""
    return {region: {key: profile} for region, profile in profiles.items()}
