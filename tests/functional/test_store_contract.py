"""The StepStore contract of tests/unit/test_store.py, run on DynamoDB (moto) with CheckpointStore:
both stores must behave the same."""

import boto3
import pytest
from moto import mock_aws

from longstep import keys
from longstep.store import CheckpointStore
from tests.unit.test_store import *  # noqa: F403 - the same tests, on this module's fixture


@pytest.fixture
def store():
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        ddb.create_table(TableName="checkpoints", **keys.checkpoint_table().create_table_arguments())
        yield CheckpointStore("checkpoints", ddb)
