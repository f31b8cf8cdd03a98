"""The IAM grants ``bedrock:InvokeModel`` needs for a model id: resources, and their condition.

A plain foundation-model id (``anthropic.claude-...``) is granted on the model in the caller's
Region. A system-defined cross-Region inference profile (``us.anthropic...``, ``global...``)
needs InvokeModel on the profile *and* on the foundation model in whichever destination Region
the request is routed to
(https://docs.aws.amazon.com/bedrock/latest/userguide/geographic-cross-region-inference.html).
AWS adds destination Regions to profiles over time, and a request routed to an ungranted Region
fails with AccessDenied, so the model is not granted Region by Region: it is granted in any
Region (``arn:aws:bedrock:*::foundation-model/<model>``) on the condition that the request came
through this very profile, the ``bedrock:InferenceProfileArn`` condition key AWS documents for
restricting a foundation model to calls through an inference profile
(https://docs.aws.amazon.com/bedrock/latest/userguide/inference-profiles-prereq.html; the same
any-Region pattern, with ``ArnLike``, is the policy of
https://docs.aws.amazon.com/deadline-cloud/latest/userguide/assistant-permissions.html). A direct
call on the foundation model, without the profile, matches no grant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Geography prefixes of system-defined cross-Region profiles.
PROFILE_PREFIXES = ("us", "eu", "apac", "jp", "au", "ca", "us-gov", "global")

# The condition key Bedrock sets on the foundation-model check of a call made through a profile.
PROFILE_CONDITION_KEY = "bedrock:InferenceProfileArn"


class BedrockAccessError(ValueError):
    """The model cannot be called from the stack's Region (``longstep_kit.model_regions``)."""


@dataclass(frozen=True)
class ModelGrant:
    """One ``bedrock:InvokeModel`` statement: its resources, and the profile it is limited to.

    Attributes:
        resources: the resource ARNs.
        through_profile: the inference profile ARN the call must come through (None: no condition).
    """

    resources: tuple[str, ...]
    through_profile: str | None = None

    def conditions(self) -> dict[str, Any] | None:
        """The statement's IAM ``Condition`` block, or None."""
        if self.through_profile is None:
            return None
        return {"ArnLike": {PROFILE_CONDITION_KEY: self.through_profile}}


def split_profile(model_id: str) -> tuple[str | None, str]:
    """``(geography prefix, foundation model id)``; the prefix is None for a plain model id."""
    head, dot, rest = model_id.partition(".")
    if dot and head in PROFILE_PREFIXES and "." in rest:
        return head, rest
    return None, model_id


def profile_arn(model_id: str, *, region: str, account: str, partition: str = "aws") -> str:
    """The ARN of the system-defined inference profile ``model_id`` called from ``region``."""
    return f"arn:{partition}:bedrock:{region}:{account}:inference-profile/{model_id}"


def invoke_model_grants(model_id: str, *, region: str, account: str, partition: str = "aws", foundation_model: str | None = None) -> list[ModelGrant]:
    """The ``bedrock:InvokeModel`` statements for ``model_id``, called from ``region``.

    Which profile may be called from which Region is ``longstep_kit.model_regions``'s concern;
    these grants follow whatever id the function is given.

    Args:
        model_id: a foundation model id (``anthropic.claude-...``) or a system-defined inference
            profile id (``us.anthropic.claude-...``); or a profile id chosen at deploy time (a
            token, ``foundation_model`` names the model behind it).
        region: the Region the function calls Bedrock from (the profile's source Region).
        account: the account id (inference profiles are account-scoped ARNs).
        partition: the ARN partition.
        foundation_model: the foundation model behind a deploy-time profile id.

    Returns:
        For a plain id, one grant on the model in ``region``; for a profile, one grant on the
        profile and one on the model in any Region, conditioned on that profile.
    """
    base = foundation_model
    if base is None:
        prefix, base = split_profile(model_id)
        if prefix is None:
            return [ModelGrant((f"arn:{partition}:bedrock:{region}::foundation-model/{model_id}",))]
    profile = profile_arn(model_id, region=region, account=account, partition=partition)
    return [ModelGrant((profile,)), ModelGrant((f"arn:{partition}:bedrock:*::foundation-model/{base}",), through_profile=profile)]
