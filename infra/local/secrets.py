"""Secrets on the local stack: moto's CloudFormation cannot create ``AWS::SecretsManager::Secret``.

Before the template goes to moto, each secret is created through the Secrets Manager API (with a
value generated as its ``GenerateSecretString`` asks, by moto's ``GetRandomPassword``), removed from
the template with its rotation schedule, and its ARN put wherever the template refers to it. The
rotation schedule is not emulated (nothing rotates on a laptop); the rotation function's steps are
tested on moto's Secrets Manager directly (tests/unit/test_link_key_rotation.py).
"""

from __future__ import annotations

import copy
from typing import Any

SECRET = "AWS::SecretsManager::Secret"
ROTATION = "AWS::SecretsManager::RotationSchedule"


def provision_secrets(secretsmanager: Any, template: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """Create the template's secrets in moto.

    Returns:
        The template without them (their ARNs in place of their references), and logical id -> ARN.
    """
    template = copy.deepcopy(template)
    resources = template.get("Resources", {})
    arns: dict[str, str] = {}
    for lid, res in list(resources.items()):
        if res["Type"] != SECRET:
            continue
        props = res.get("Properties", {})
        generate = props.get("GenerateSecretString", {})
        value = secretsmanager.get_random_password(
            PasswordLength=int(generate.get("PasswordLength", 32)), ExcludePunctuation=bool(generate.get("ExcludePunctuation", False))
        )["RandomPassword"]
        arns[lid] = secretsmanager.create_secret(Name=lid, SecretString=value, Description=props.get("Description", ""))["ARN"]
        del resources[lid]
    for lid, res in list(resources.items()):
        if res["Type"] == ROTATION and res.get("Properties", {}).get("SecretId", {}).get("Ref") in arns:
            del resources[lid]
    return _replace(template, arns), arns


def _replace(node: Any, arns: dict[str, str]) -> Any:
    if isinstance(node, dict):
        if set(node) == {"Ref"} and node["Ref"] in arns:
            return arns[node["Ref"]]
        out = {k: _replace(v, arns) for k, v in node.items()}
        if isinstance(out.get("DependsOn"), list):
            out["DependsOn"] = [d for d in out["DependsOn"] if d not in arns]
        elif out.get("DependsOn") in arns:
            del out["DependsOn"]
        return out
    if isinstance(node, list):
        return [_replace(v, arns) for v in node]
    return node
