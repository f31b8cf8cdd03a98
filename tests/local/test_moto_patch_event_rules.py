"""The local stack's EventBridge rules against moto's own: a disabled rule matches no event, as in
AWS ("A disabled rule won't match any events":
https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_DisableRule.html), where moto
delivered to it; an enabled one delivers as moto does (``moto_patches.event_rules_invoke_lambda``)."""

from __future__ import annotations

import json

import boto3
import pytest
from moto import mock_aws

from longstep_kit.local import moto_patches

REGION = "us-east-1"


def _delivered(state: str) -> int:
    """Messages an SQS target of a rule in ``state`` gets for one matching event (moto delivers
    to SQS inside PutEvents: nothing is in flight when it answers)."""
    events, sqs = boto3.client("events", region_name=REGION), boto3.client("sqs", region_name=REGION)
    queue = sqs.create_queue(QueueName=f"q-{state.lower()}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(Name=f"r-{state.lower()}", EventPattern=json.dumps({"source": [f"probe.{state.lower()}"]}), State=state)
    events.put_targets(Rule=f"r-{state.lower()}", Targets=[{"Id": "q", "Arn": arn}])
    answer = events.put_events(Entries=[{"Source": f"probe.{state.lower()}", "DetailType": "Probe", "Detail": "{}"}])
    assert answer["FailedEntryCount"] == 0
    return len(sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", []))


@pytest.mark.parametrize("patched", [False, True], ids=["moto", "local stack"])
def test_a_disabled_rule_matches_no_event(patched):
    with mock_aws():
        if patched:
            moto_patches.event_rules_invoke_lambda()
        try:
            enabled, disabled = _delivered("ENABLED"), _delivered("DISABLED")
        finally:
            moto_patches.undo_all()
    assert enabled == 1  # the same as moto's
    assert disabled == (0 if patched else 1)  # moto delivers to a disabled rule; AWS does not
    assert moto_patches.applied() == []
