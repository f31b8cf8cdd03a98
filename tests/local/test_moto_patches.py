"""moto's DynamoDB, its JSON serializer and its request plumbing as the local stack patches them, checked against moto's
own behaviour: the same calls give the same answers with the patch as without it
(``longstep_kit.local.moto_patches``; the engine's and the parsers' patches are
``tests/local/test_moto_patches_engine.py``'s)."""

from __future__ import annotations

import json
import random
import threading
from typing import Any

import boto3
import botocore.exceptions
import pytest
from moto import mock_aws

from longstep_kit.local import moto_patches

REGION = "us-east-1"


def _tables(ddb: Any) -> None:
    ddb.create_table(
        TableName="records",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
            {"AttributeName": "status", "AttributeType": "S"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "by_status",
                "KeySchema": [{"AttributeName": "status", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    ddb.create_table(
        TableName="numbers",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "n", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "n", "AttributeType": "N"}],
        BillingMode="PAY_PER_REQUEST",
    )
    ddb.create_table(
        TableName="flat",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    rng = random.Random(13)
    for run in range(6):
        for i in range(rng.randint(5, 40)):
            kind = rng.choice(["step", "turn", "snapshot", "approval"])
            item = {
                "pk": {"S": f"run-{run}"},
                "sk": {"S": f"{kind}#{i:04d}"},
                "status": {"S": rng.choice(["pending", "done"])},
                "size": {"N": str(rng.randint(1, 500))},
            }
            if rng.random() < 0.5:
                item["body"] = {"S": "x" * rng.randint(1, 2000)}
            ddb.put_item(TableName="records", Item=item)
            ddb.put_item(TableName="numbers", Item={"pk": {"S": f"run-{run}"}, "n": {"N": str(rng.randint(-50, 50) * 7 + i)}, "v": {"S": kind}})
    for i in range(10):
        ddb.put_item(TableName="flat", Item={"id": {"S": f"id-{i}"}, "v": {"N": str(i)}})
    every_type = {
        "id": {"S": "every-type"},
        "b": {"B": b"\x00\x01bytes"},
        "yes": {"BOOL": True},
        "no": {"BOOL": False},
        "nothing": {"NULL": True},
        "m": {"M": {"s": {"S": "x"}, "l": {"L": [{"N": "1"}, {"S": "y"}, {"M": {}}]}}},
        "ss": {"SS": ["a", "b"]},
        "ns": {"NS": ["1", "2.5"]},
        "bs": {"BS": [b"a", b"b"]},
        "empty": {"L": []},
    }
    ddb.put_item(TableName="flat", Item=every_type)


QUERIES: list[dict[str, Any]] = [
    {"TableName": "records", "KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": "run-1"}}},
    {"TableName": "records", "KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": "no-such-run"}}},
    {
        "TableName": "records",
        "KeyConditionExpression": "pk = :p AND begins_with(sk, :k)",
        "ExpressionAttributeValues": {":p": {"S": "run-2"}, ":k": {"S": "turn#"}},
    },
    {
        "TableName": "records",
        "KeyConditionExpression": "pk = :p AND sk BETWEEN :a AND :b",
        "ExpressionAttributeValues": {":p": {"S": "run-3"}, ":a": {"S": "snapshot#"}, ":b": {"S": "step#9"}},
    },
    {
        "TableName": "records",
        "KeyConditionExpression": "pk = :p AND sk > :a",
        "ExpressionAttributeValues": {":p": {"S": "run-0"}, ":a": {"S": "step#0005"}},
        "ScanIndexForward": False,
    },
    {  # a log's tail: newest first, a range that runs to the partition's end
        "TableName": "records",
        "KeyConditionExpression": "pk = :p AND sk BETWEEN :a AND :b",
        "ExpressionAttributeValues": {":p": {"S": "run-2"}, ":a": {"S": "snapshot#0000"}, ":b": {"S": "turn#9999"}},
        "ScanIndexForward": False,
    },
    {
        "TableName": "records",
        "KeyConditionExpression": "pk = :p AND sk BETWEEN :a AND :b",
        "ExpressionAttributeValues": {":p": {"S": "run-3"}, ":a": {"S": "approval#0000"}, ":b": {"S": "step#9999"}, ":s": {"S": "pending"}},
        "FilterExpression": "#st = :s",
        "ExpressionAttributeNames": {"#st": "status"},
    },
    {"TableName": "records", "KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": "run-1"}}, "ScanIndexForward": False},
    {
        "TableName": "records",
        "KeyConditionExpression": "pk = :p AND sk <= :a",
        "ExpressionAttributeValues": {":p": {"S": "run-4"}, ":a": {"S": "step#0010"}},
        "Limit": 3,
    },
    {
        "TableName": "records",
        "KeyConditionExpression": "pk = :p",
        "ExpressionAttributeValues": {":p": {"S": "run-5"}, ":s": {"S": "done"}},
        "FilterExpression": "#st = :s",
        "ExpressionAttributeNames": {"#st": "status"},
        "ProjectionExpression": "sk, #st",
    },
    {
        "TableName": "records",
        "KeyConditionExpression": "pk = :p AND sk >= :a",
        "ExpressionAttributeValues": {":p": {"S": "run-1"}, ":a": {"S": "t"}},
        "Select": "COUNT",
    },
    {
        "TableName": "records",
        "IndexName": "by_status",
        "KeyConditionExpression": "#st = :s",
        "ExpressionAttributeNames": {"#st": "status"},
        "ExpressionAttributeValues": {":s": {"S": "pending"}},
    },
    {
        "TableName": "records",
        "KeyConditionExpression": "pk = :p AND sk = :k",
        "ExpressionAttributeValues": {":p": {"S": "run-1"}, ":k": {"S": "step#0003"}},
    },
    {
        "TableName": "records",
        "KeyConditionExpression": "pk = :p AND sk < :k",
        "ExpressionAttributeValues": {":p": {"S": "run-2"}, ":k": {"S": "step#0003"}},
        "ScanIndexForward": False,
    },
    {
        "TableName": "numbers",
        "KeyConditionExpression": "pk = :p AND n BETWEEN :a AND :b",
        "ExpressionAttributeValues": {":p": {"S": "run-3"}, ":a": {"N": "-20"}, ":b": {"N": "75.5"}},
    },
    {"TableName": "numbers", "KeyConditionExpression": "pk = :p AND n >= :n", "ExpressionAttributeValues": {":p": {"S": "run-0"}, ":n": {"N": "0"}}},
    {"TableName": "numbers", "KeyConditionExpression": "pk = :p AND n < :n", "ExpressionAttributeValues": {":p": {"S": "run-2"}, ":n": {"N": "10"}}},
    {"TableName": "numbers", "KeyConditionExpression": "pk = :p AND n = :n", "ExpressionAttributeValues": {":p": {"S": "run-2"}, ":n": {"N": "3"}}},
    {"TableName": "flat", "KeyConditionExpression": "id = :i", "ExpressionAttributeValues": {":i": {"S": "id-4"}}},
    {"TableName": "flat", "KeyConditionExpression": "id = :i", "ExpressionAttributeValues": {":i": {"S": "id-99"}}},
]


def _pages(ddb: Any, query: dict[str, Any], limit: int | None) -> list[dict[str, Any]]:
    """Every page of ``query`` (``Limit`` ``limit``), as moto answers them."""
    pages, kwargs = [], dict(query, **({"Limit": limit} if limit else {}))
    while True:
        page = ddb.query(**kwargs)
        page.pop("ResponseMetadata")
        pages.append(page)
        if "LastEvaluatedKey" not in page or len(pages) > 100:
            return pages
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _answers(ddb: Any) -> list[Any]:
    return [_pages(ddb, q, limit) for q in QUERIES for limit in (None, 1, 4)]


def test_a_query_reads_one_partition_and_answers_as_moto_does():
    from moto.dynamodb.models.table import Table

    with mock_aws():
        ddb = boto3.client("dynamodb", region_name=REGION)
        _tables(ddb)
        as_moto = _answers(ddb)
        moto_patches.dynamodb_query_reads_one_partition(threading.RLock())
        try:
            listed = []
            original_all_items = Table.all_items

            def spying(table: Any) -> Any:
                listed.append(table.name)
                return original_all_items(table)

            Table.all_items = spying  # the patch's per-call listing hides this one
            try:
                patched = _answers(ddb)
            finally:
                Table.all_items = original_all_items
        finally:
            moto_patches.undo_all()
        assert moto_patches.applied() == []
    assert patched == as_moto
    assert sum(len(p) for a in as_moto for p in a) > len(QUERIES)  # the pagination was exercised
    # Only the index queries still list the whole table (3 limits x 1 index query, each page).
    index_pages = sum(len(a) for q, a in zip([q for q in QUERIES for _ in range(3)], patched) if "IndexName" in q)
    assert listed == ["records"] * index_pages


@pytest.mark.parametrize("entries", [1, 50])
def test_the_patch_keeps_per_item_costs_to_the_partition(entries):
    # A query of a small partition next to a big one does not touch the big one's items.
    from moto.dynamodb.models.dynamo_type import Item

    with mock_aws():
        ddb = boto3.client("dynamodb", region_name=REGION)
        _tables(ddb)
        for i in range(entries):
            ddb.put_item(TableName="records", Item={"pk": {"S": "big"}, "sk": {"S": f"k{i:05d}"}, "status": {"S": "done"}})
        moto_patches.dynamodb_query_reads_one_partition(threading.RLock())
        sized = []
        original_size = Item.size
        Item.size = lambda item: sized.append(item.attrs["pk"].value) or original_size(item)
        try:
            ddb.query(TableName="records", KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "run-1"}})
        finally:
            Item.size = original_size
            moto_patches.undo_all()
    assert sized and set(sized) == {"run-1"}


@pytest.mark.parametrize("forward", [True, False])
def test_a_first_page_with_a_limit_reads_only_what_moto_reads_before_it_stops(forward):
    # moto looks at the neighbour before the matches, Limit matches, and the item that ends the
    # page; the patch gives it just those, and the answer is moto's own (the test above).
    from moto.dynamodb.models.dynamo_type import Item

    with mock_aws():
        ddb = boto3.client("dynamodb", region_name=REGION)
        _tables(ddb)
        for i in range(60):
            ddb.put_item(TableName="records", Item={"pk": {"S": "log"}, "sk": {"S": f"event#{i:05d}"}, "status": {"S": "done"}})
        query = {
            "TableName": "records",
            "KeyConditionExpression": "pk = :p AND sk BETWEEN :a AND :b",
            "ExpressionAttributeValues": {":p": {"S": "log"}, ":a": {"S": "event#00000"}, ":b": {"S": "event#99999"}},
            "ScanIndexForward": forward,
            "Limit": 2,
        }
        as_moto = ddb.query(**query)
        moto_patches.dynamodb_query_reads_one_partition(threading.RLock())
        sized = []
        original_size = Item.size
        Item.size = lambda item: sized.append(item.attrs["sk"].value) or original_size(item)
        try:
            patched = ddb.query(**query)
        finally:
            Item.size = original_size
            moto_patches.undo_all()
    for answer in (as_moto, patched):
        answer.pop("ResponseMetadata")
    assert patched == as_moto and "LastEvaluatedKey" in patched
    assert [item["sk"]["S"] for item in patched["Items"]] == (["event#00000", "event#00001"] if forward else ["event#00059", "event#00058"])
    assert len(set(sized)) == 3  # two matches and the one that ends the page, of 60


def _responses(clients: dict[str, Any], arns: dict[str, str]) -> list[Any]:
    sfn, ddb, iam = clients["stepfunctions"], clients["dynamodb"], clients["iam"]
    calls = [
        lambda: sfn.get_execution_history(executionArn=arns["execution"]),
        lambda: sfn.describe_execution(executionArn=arns["execution"]),
        lambda: sfn.describe_state_machine(stateMachineArn=arns["machine"]),
        lambda: sfn.list_executions(stateMachineArn=arns["machine"]),
        lambda: ddb.get_item(TableName="records", Key={"pk": {"S": "run-1"}, "sk": {"S": "step#0001"}}),
        lambda: ddb.describe_table(TableName="records"),
        lambda: ddb.scan(TableName="flat"),
        lambda: ddb.get_item(TableName="flat", Key={"id": {"S": "every-type"}}),
        lambda: iam.get_role(RoleName="speed"),
    ]
    out = []
    for call in calls:
        answer = call()
        answer.pop("ResponseMetadata", None)
        out.append(answer)
    return out


def test_the_serializer_answers_as_moto_does_with_remembered_aliases():
    from longstep_kit.testing.wait import wait_execution

    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        clients = {s: boto3.client(s, region_name=REGION) for s in ("stepfunctions", "dynamodb", "iam")}
        _tables(clients["dynamodb"])
        role = clients["iam"].create_role(RoleName="speed", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        definition = {
            "StartAt": "Count",
            "States": {
                "Count": {"Type": "Pass", "Parameters": {"i.$": "States.MathAdd($.i, 1)"}, "Next": "More"},
                "More": {"Type": "Choice", "Choices": [{"Variable": "$.i", "NumericLessThan": 5, "Next": "Count"}], "Default": "Fail"},
                "Fail": {"Type": "Fail", "Error": "Done", "Cause": "five"},
            },
        }
        machine = clients["stepfunctions"].create_state_machine(name="m", definition=json.dumps(definition), roleArn=role)["stateMachineArn"]
        execution = clients["stepfunctions"].start_execution(stateMachineArn=machine, input=json.dumps({"i": 0}))["executionArn"]
        assert wait_execution(clients["stepfunctions"], execution, 60)["status"] == "FAILED"
        arns = {"machine": machine, "execution": execution}
        as_moto = _responses(clients, arns)
        moto_patches.serializer_remembers_aliases()
        try:
            patched = [_responses(clients, arns) for _ in range(2)]  # computed, then remembered
            moto_patches.serializer_skips_absent_members()  # and with absent members skipped, as the local stack runs
            skipping = [_responses(clients, arns) for _ in range(2)]
        finally:
            moto_patches.undo_all()
    assert len(as_moto[0]["events"]) > 10
    assert patched[0] == as_moto and patched[1] == as_moto
    assert skipping[0] == as_moto and skipping[1] == as_moto


def _plumbing_answers(clients: dict[str, Any]) -> list[Any]:
    ddb, sfn = clients["dynamodb"], clients["stepfunctions"]
    calls = [
        lambda: ddb.list_tables(),
        lambda: ddb.get_item(TableName="flat", Key={"id": {"S": "id-3"}}),
        lambda: ddb.query(TableName="flat", KeyConditionExpression="id = :i", ExpressionAttributeValues={":i": {"S": "id-4"}}),
        lambda: ddb.get_item(TableName="missing", Key={"id": {"S": "x"}}),  # moto's error, as an answer
        lambda: sfn.list_state_machines(),
        lambda: sfn.describe_execution(executionArn="arn:aws:states:us-east-1:123456789012:execution:none:none"),
    ]
    out = []
    for call in calls:
        try:
            answer = call()
            answer.pop("ResponseMetadata", None)
        except botocore.exceptions.ClientError as exc:
            answer = exc.response["Error"]
        out.append(answer)
    return out


def test_actions_listed_once_and_user_agents_cleaned_once_answer_as_moto_does():
    from botocore import useragent
    from moto.core import responses, utils
    from moto.dynamodb.responses import DynamoHandler

    with mock_aws():
        clients = {name: boto3.client(name, region_name=REGION) for name in ("dynamodb", "stepfunctions")}
        _tables(clients["dynamodb"])
        header = useragent.UserAgentString.from_environment().to_string()
        as_moto = _plumbing_answers(clients)
        moto_patches.response_actions_listed_once()
        moto_patches.user_agent_parts_cleaned_once()
        try:
            listed = []
            names = responses.method_names_from_class(DynamoHandler)
            assert names == utils.method_names_from_class(DynamoHandler) and "get_item" in names
            names.append("not_an_action")  # a caller's change stays its own
            assert "not_an_action" not in responses.method_names_from_class(DynamoHandler)
            patched = _plumbing_answers(clients)
            patched_header = useragent.UserAgentString.from_environment().to_string()
            assert useragent.sanitize_user_agent_string_component.cache_info().hits > 0
            # A patch applied later (one adding an API) is seen: the class is listed again.
            moto_patches.add(DynamoHandler, "longstep_probe", lambda self: listed.append(1))
            assert "longstep_probe" in responses.method_names_from_class(DynamoHandler)
        finally:
            moto_patches.undo_all()
        assert "longstep_probe" not in responses.method_names_from_class(DynamoHandler)
    assert patched == as_moto and patched_header == header
    assert as_moto[3]["Code"] == "ResourceNotFoundException"
