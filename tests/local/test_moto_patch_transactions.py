"""``TransactWriteItems`` with a ``ClientRequestToken`` on the local stack against moto's own: an
identical call with the token of one that succeeded within 10 minutes writes nothing and answers
success, as AWS's API reference says
(https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html);
moto ran it again (``moto_patches.transactions_keep_request_tokens``)."""

from __future__ import annotations

import boto3
import botocore.exceptions
import pytest
from moto import mock_aws

from longstep_kit.local import moto_patches

REGION = "us-east-1"


def _table():
    """A client, and the table ``t`` (key ``k``) its transactions write."""
    ddb = boto3.client("dynamodb", region_name=REGION)
    ddb.create_table(
        TableName="t",
        KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return ddb


def _count(ddb) -> int:
    item = ddb.get_item(TableName="t", Key={"k": {"S": "a"}}, ConsistentRead=True).get("Item")
    return int(item["n"]["N"]) if item else 0


def _add(ddb, token: str, by: int = 1) -> str:
    """One transaction adding ``by`` to the counter under ``token``; its answer's error code, or ok."""
    items = [
        {
            "Update": {
                "TableName": "t",
                "Key": {"k": {"S": "a"}},
                "UpdateExpression": "ADD n :by",
                "ConditionExpression": "attribute_not_exists(n) OR n < :cap",
                "ExpressionAttributeValues": {":by": {"N": str(by)}, ":cap": {"N": "100"}},
            }
        }
    ]
    try:
        ddb.transact_write_items(TransactItems=items, ClientRequestToken=token)
    except botocore.exceptions.ClientError as exc:
        return exc.response["Error"]["Code"]
    return "ok"


@pytest.mark.parametrize("patched", [False, True], ids=["moto", "local stack"])
def test_a_transaction_repeated_with_its_token_writes_once(patched):
    now = [1_000.0]
    with mock_aws():
        if patched:
            moto_patches.transactions_keep_request_tokens(lambda: now[0])
        try:
            ddb = _table()
            answers = [_add(ddb, "tok-1"), _add(ddb, "tok-1")]  # an SDK retry of a lost response sends the same token
            counted = _count(ddb)
            mismatch = _add(ddb, "tok-1", by=5)  # the same token, other items
            now[0] += 601  # past the 10 minutes: a new request
            late = _add(ddb, "tok-1")
            after = _count(ddb)
        finally:
            moto_patches.undo_all()
    assert answers == ["ok", "ok"]
    if patched:
        assert counted == 1 and mismatch == "IdempotentParameterMismatchException"
        assert late == "ok" and after == 2
    else:  # moto runs every call
        assert counted == 2 and mismatch == "ok" and after == 8
    assert moto_patches.applied() == []


def test_the_token_of_a_cancelled_transaction_is_not_remembered():
    with mock_aws():
        moto_patches.transactions_keep_request_tokens(lambda: 0.0)
        try:
            ddb = _table()
            ddb.put_item(TableName="t", Item={"k": {"S": "a"}, "n": {"N": "100"}})
            cancelled = _add(ddb, "tok-2")  # over the cap: cancelled, nothing written
            ddb.put_item(TableName="t", Item={"k": {"S": "a"}, "n": {"N": "1"}})
            again = _add(ddb, "tok-2")  # runs as moto runs it
            counted = _count(ddb)
        finally:
            moto_patches.undo_all()
    assert (cancelled, again, counted) == ("TransactionCanceledException", "ok", 2)
