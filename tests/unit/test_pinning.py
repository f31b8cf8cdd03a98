"""Which version a run's next execution runs (``longstep.pinning``), and the local stack's moto
patches for versions and aliases, checked against moto's own behaviour."""

from __future__ import annotations

import json

import boto3
import pytest
from moto import mock_aws

from longstep import pinning
from longstep_kit.local import moto_patches
from longstep_kit.local.stack import MOTO_CONFIG

OLD, NEW = "0123456789abcdef", "fedcba9876543210"
DEFINITION = json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Pass", "Result": {"v": 1}, "End": True}}})
ROLE = "arn:aws:iam::123456789012:role/sfn"


def test_the_declaration_round_trips_and_ignores_other_descriptions():
    assert pinning.parse_compatible(pinning.describe_compatible([NEW, OLD])) == {OLD, NEW}
    assert pinning.parse_compatible(pinning.describe_compatible([])) == frozenset()
    assert pinning.parse_compatible("deployed on Tuesday") == frozenset()
    assert pinning.parse_compatible(None) == frozenset()


def test_alias_and_unqualified_arns():
    arn = "arn:aws:states:us-east-1:1:stateMachine:sm"
    assert pinning.unqualified(f"{arn}:3") == arn and pinning.unqualified(arn) == arn
    assert pinning.alias_arn(f"{arn}:3") == f"{arn}:live"


@pytest.fixture
def sfn():
    with mock_aws(config=MOTO_CONFIG):
        moto_patches.state_machine_versions()
        try:
            client = boto3.client("stepfunctions", region_name="us-east-1")
            arn = client.create_state_machine(name="sm", definition=DEFINITION, roleArn=ROLE)["stateMachineArn"]
            v1 = client.publish_state_machine_version(stateMachineArn=arn, description=pinning.describe_compatible([]))["stateMachineVersionArn"]
            client.create_state_machine_alias(name=pinning.ALIAS_NAME, routingConfiguration=[{"stateMachineVersionArn": v1, "weight": 100}])
            yield client, arn, v1
        finally:
            moto_patches.undo_all()


def _deploy(client, arn: str, compatible: list[str]) -> str:
    """A deploy of new code: a new revision, its version, the alias moved to it."""
    versions = client.list_state_machine_versions(stateMachineArn=arn)["stateMachineVersions"]
    definition = DEFINITION.replace('"v": 1', f'"v": {len(versions) + 1}')
    client.update_state_machine(stateMachineArn=arn, definition=definition)
    v2 = client.publish_state_machine_version(stateMachineArn=arn, description=pinning.describe_compatible(compatible))["stateMachineVersionArn"]
    client.update_state_machine_alias(
        stateMachineAliasArn=pinning.alias_arn(arn), routingConfiguration=[{"stateMachineVersionArn": v2, "weight": 100}]
    )
    return v2


def test_an_execution_on_the_alias_runs_and_records_its_version(sfn):
    client, arn, v1 = sfn
    execution = client.start_execution(stateMachineArn=pinning.alias_arn(arn), name="run")["executionArn"]
    described = client.describe_execution(executionArn=execution)
    assert described["stateMachineVersionArn"] == v1 and described["stateMachineAliasArn"] == pinning.alias_arn(arn)
    assert described["stateMachineArn"] == arn
    assert [e["name"] for e in client.list_executions(stateMachineArn=v1)["executions"]] == ["run"]
    assert [e["name"] for e in client.list_executions(stateMachineArn=arn)["executions"]] == ["run"]


def test_a_run_stays_pinned_unless_the_new_version_declares_its_code_compatible(sfn):
    client, arn, v1 = sfn
    execution = client.start_execution(stateMachineArn=pinning.alias_arn(arn), name="run")["executionArn"]
    assert pinning.next_version(client, arn, execution, OLD) == pinning.NextVersion(v1, False, "the alias still points at the run's version")
    v2 = _deploy(client, arn, compatible=[])
    assert pinning.next_version(client, arn, execution, OLD).arn == v1  # not declared: pinned
    v3 = _deploy(client, arn, compatible=[OLD])
    moved = pinning.next_version(client, arn, execution, OLD)
    assert moved.arn == v3 and moved.moved and v2 != v3
    assert pinning.next_version(client, arn, execution, None).arn == v1  # unrecorded code: pinned


def test_an_execution_started_unqualified_is_not_pinned(sfn):
    client, arn, _ = sfn
    execution = client.start_execution(stateMachineArn=arn, name="plain")["executionArn"]
    assert "stateMachineVersionArn" not in client.describe_execution(executionArn=execution)  # moto's own answer, unchanged
    assert pinning.next_version(client, f"{arn}", execution, OLD).arn == arn


def test_versions_publish_idempotently_list_and_delete_as_aws_documents(sfn):
    client, arn, v1 = sfn
    # The same revision again: the same version (PublishStateMachineVersion is idempotent).
    assert client.publish_state_machine_version(stateMachineArn=arn)["stateMachineVersionArn"] == v1
    v2 = _deploy(client, arn, compatible=[])
    listed = [v["stateMachineVersionArn"] for v in client.list_state_machine_versions(stateMachineArn=arn)["stateMachineVersions"]]
    assert listed == [v2, v1]
    with pytest.raises(client.exceptions.ClientError, match="ConflictException"):
        client.delete_state_machine_version(stateMachineVersionArn=v2)  # the alias routes to it
    running = client.start_execution(stateMachineArn=v1, name="old")["executionArn"]
    client.delete_state_machine_version(stateMachineVersionArn=v1)
    assert [v["stateMachineVersionArn"] for v in client.list_state_machine_versions(stateMachineArn=arn)["stateMachineVersions"]] == [v2]
    assert client.describe_execution(executionArn=running)["name"] == "old"  # its execution is still there
