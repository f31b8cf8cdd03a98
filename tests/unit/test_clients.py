"""The shared boto3 clients: one per service, with their exception classes built before any
thread can race botocore's check-then-set cache of them."""

from __future__ import annotations

import threading

import boto3

from longstep import clients


def test_a_shared_client_is_made_once_with_its_exception_classes_built():
    made = []

    def factory(service: str):
        made.append(service)
        return boto3.client(service, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")

    with clients.made_by(factory):
        found = clients.client("dynamodb")
        # botocore's own slot for them: None until first use (botocore/client.py, ``exceptions``).
        assert found._exceptions is not None
        seen = []
        threads = [
            threading.Thread(target=lambda: seen.append(clients.client("dynamodb").exceptions.ConditionalCheckFailedException)) for _ in range(8)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert made == ["dynamodb"] and len(seen) == 8 and len(set(seen)) == 1
