"""Rotating the link key on moto: a new current key, the old one previous, old links still valid."""

from __future__ import annotations

import time
import uuid

import boto3
import pytest
from moto import mock_aws

from longstep import links
from longstep.link_key_rotation import RotationError, rotate

NOW = 1_893_456_000.0


@mock_aws
def test_a_rotation_keeps_links_in_flight_valid():
    sm = boto3.client("secretsmanager", region_name="us-east-1")
    arn = sm.create_secret(Name="link-key", SecretString="a" * 64)["ARN"]
    old = links.keyring_from_secret(sm, arn)
    link = old.sign(links.Capability(links.Scope(approval="abc"), int(NOW) + 60))
    token = str(uuid.uuid4())
    # What Secrets Manager does before it calls the function: rotation on, a pending version id.
    _start_rotation(sm, arn, token)
    for step in ("createSecret", "setSecret", "testSecret", "finishSecret"):
        rotate(sm, {"SecretId": arn, "ClientRequestToken": token, "Step": step})
    new = links.keyring_from_secret(sm, arn)
    assert new.current != old.current and new.previous == (old.current,)
    assert new.verify(link, NOW).scope.approval == "abc"
    rotate(sm, {"SecretId": arn, "ClientRequestToken": token, "Step": "finishSecret"})  # a retry changes nothing
    assert links.keyring_from_secret(sm, arn).current == new.current


def _start_rotation(sm, arn: str, token: str) -> None:
    """The part of RotateSecret the test needs: a version labelled AWSPENDING, rotation enabled."""
    from moto.secretsmanager.models import secretsmanager_backends

    secret = secretsmanager_backends["123456789012"]["us-east-1"].secrets[arn]
    secret.rotation_enabled = secret.rotation_requested = True
    secret.versions[token] = {"version_id": token, "version_stages": ["AWSPENDING"], "createdate": int(time.time())}


@mock_aws
def test_a_version_that_is_not_pending_is_refused():
    sm = boto3.client("secretsmanager", region_name="us-east-1")
    arn = sm.create_secret(Name="link-key", SecretString="a" * 64)["ARN"]
    with pytest.raises(RotationError, match="not enabled"):
        rotate(sm, {"SecretId": arn, "ClientRequestToken": "x", "Step": "createSecret"})
