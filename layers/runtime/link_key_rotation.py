"""Rotation of the link key: Secrets Manager's four rotation steps for a key nothing else holds.

Secrets Manager invokes the function with ``Step`` = ``createSecret`` (put a new random key as the
``AWSPENDING`` version), ``setSecret`` (nothing to do: no other system holds the key), ``testSecret``
(the pending key is long enough to sign with) and ``finishSecret`` (move ``AWSCURRENT`` to it; AWS
moves ``AWSPREVIOUS`` to the old key, which ``longstep.links`` still accepts, so links in flight
keep working until the next rotation). The shape follows AWS's rotation function template:
https://docs.aws.amazon.com/secretsmanager/latest/userguide/rotate-secrets_lambda-functions.html
"""

from __future__ import annotations

from typing import Any

from longstep.errors import RotationError
from longstep.links import KeyRing

KEY_CHARS = 64  # alphanumerics: about 380 random bits


def rotate(secrets: Any, event: dict[str, Any]) -> None:
    """Run one rotation step (``event``: ``SecretId``, ``ClientRequestToken``, ``Step``).

    Raises:
        RotationError: rotation is off, or the version is not the pending one.
    """
    arn, token, step = event["SecretId"], event["ClientRequestToken"], event["Step"]
    meta = secrets.describe_secret(SecretId=arn)
    if not meta.get("RotationEnabled"):
        raise RotationError("the secret is not enabled for rotation")
    stages = meta.get("VersionIdsToStages", {})
    if token not in stages:
        raise RotationError("the version to rotate to does not exist")
    if "AWSCURRENT" in stages[token]:
        return  # already finished
    if "AWSPENDING" not in stages[token]:
        raise RotationError("the version to rotate to is not pending")
    if step == "createSecret":
        try:
            secrets.get_secret_value(SecretId=arn, VersionId=token, VersionStage="AWSPENDING")
        except secrets.exceptions.ResourceNotFoundException:
            key = secrets.get_random_password(PasswordLength=KEY_CHARS, ExcludePunctuation=True)["RandomPassword"]
            secrets.put_secret_value(SecretId=arn, ClientRequestToken=token, SecretString=key, VersionStages=["AWSPENDING"])
    elif step == "setSecret":
        pass
    elif step == "testSecret":
        pending = secrets.get_secret_value(SecretId=arn, VersionId=token, VersionStage="AWSPENDING")["SecretString"]
        KeyRing(pending.encode("utf-8"))  # raises LinkKeyError when it is too short to sign with
    elif step == "finishSecret":
        current = next(v for v, labels in stages.items() if "AWSCURRENT" in labels)
        secrets.update_secret_version_stage(SecretId=arn, VersionStage="AWSCURRENT", MoveToVersionId=token, RemoveFromVersionId=current)
    else:
        raise RotationError(f"Step: unknown step {step!r}")
