"""The IAM resources ``bedrock:InvokeModel`` must be granted on for a model id.

Calling a cross-Region inference profile (``us.anthropic...``) needs InvokeModel on the profile
*and* on the foundation model in every destination Region the profile may route to; a missing
Region fails only the requests routed there. The destination Regions come from AWS's table of
system-defined profiles (Supported Regions and models for inference profiles):
https://docs.aws.amazon.com/bedrock/latest/userguide/inference-profiles-support.html
(and the IAM pattern from https://docs.aws.amazon.com/bedrock/latest/userguide/cross-region-inference.html).
AWS adds destination Regions over time: check a profile with
``aws bedrock get-inference-profile --inference-profile-identifier <id>`` (its ``models`` list the
foundation-model ARN of each destination) and pass ``destinations`` for a profile not listed here.
"""

from __future__ import annotations

from typing import Iterable

# Geography prefixes of system-defined cross-Region profiles.
PROFILE_PREFIXES = ("us", "eu", "apac", "jp", "au", "ca", "us-gov", "global")

# Profile id -> destination Regions (the union over its source Regions: some profiles route to
# fewer Regions from some sources, e.g. from us-west-2).
PROFILE_DESTINATIONS: dict[str, tuple[str, ...]] = {
    "us.anthropic.claude-sonnet-4-6": ("us-east-1", "us-east-2", "us-west-2"),
    "us.anthropic.claude-sonnet-4-5-20250929-v1:0": ("us-east-1", "us-east-2", "us-west-2"),
    "us.anthropic.claude-haiku-4-5-20251001-v1:0": ("us-east-1", "us-east-2", "us-west-2"),
    "us.anthropic.claude-opus-4-6-v1": ("us-east-1", "us-east-2", "us-west-2"),
}


class BedrockAccessError(ValueError):
    """The model id cannot be turned into IAM resources (unknown profile, wrong source Region)."""


def split_profile(model_id: str) -> tuple[str | None, str]:
    """``(geography prefix, foundation model id)``; the prefix is None for a plain model id."""
    head, dot, rest = model_id.partition(".")
    if dot and head in PROFILE_PREFIXES and "." in rest:
        return head, rest
    return None, model_id


def invoke_model_resources(
    model_id: str,
    *,
    region: str,
    account: str,
    partition: str = "aws",
    destinations: Iterable[str] | None = None,
    check_source: bool = True,
) -> list[str]:
    """The resource ARNs to grant ``bedrock:InvokeModel`` on for ``model_id``, called from ``region``.

    Args:
        model_id: a foundation model id (``anthropic.claude-...``) or a system-defined inference
            profile id (``us.anthropic.claude-...``).
        region: the Region the function calls Bedrock from (the profile's source Region).
        account: the account id (inference profiles are account-scoped ARNs).
        partition: the ARN partition.
        destinations: the profile's destination Regions, for a profile not in ``PROFILE_DESTINATIONS``.
        check_source: refuse a source Region outside the profile's geography (off when ``region``
            is a deploy-time token: an environment-agnostic stack).

    Raises:
        BedrockAccessError: a profile with no known destinations, or a source Region outside the
            profile's geography.
    """
    prefix, base = split_profile(model_id)
    if prefix is None:
        return [f"arn:{partition}:bedrock:{region}::foundation-model/{model_id}"]
    if prefix == "global":
        # Global profiles route to every commercial Region: the foundation model in any Region.
        regions: tuple[str, ...] = ("*",)
    else:
        known = PROFILE_DESTINATIONS.get(model_id)
        regions = tuple(destinations) if destinations is not None else (known or ())
        if not regions:
            raise BedrockAccessError(
                f"model_id: no destination Regions known for inference profile {model_id!r}; "
                "pass destinations (aws bedrock get-inference-profile lists them)"
            )
        if check_source and prefix in ("us", "eu", "ca", "au") and not region.startswith(f"{prefix}-"):
            raise BedrockAccessError(f"model_id: profile {model_id!r} cannot be called from {region} (its source Regions are {prefix}-*)")
    profile = f"arn:{partition}:bedrock:{region}:{account}:inference-profile/{model_id}"
    return [profile, *(f"arn:{partition}:bedrock:{r}::foundation-model/{base}" for r in sorted(set(regions)))]
