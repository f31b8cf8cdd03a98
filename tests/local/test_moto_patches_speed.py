"""The local stack's per-request speed patches checked against moto's own answers: request routing
found once per URL, a partition's sort order kept between Queries, expression processors' node
tables read once (``longstep_kit.local.moto_patches``)."""

from __future__ import annotations

import random
import threading
from typing import Any, Callable

import boto3
import botocore.exceptions
from moto import mock_aws

from longstep_kit.local import moto_patches
from longstep_kit.local.moto_patches import partition_order

REGION = "us-east-1"


def _answer(call: Callable[[], Any]) -> Any:
    """A call's answer without its request metadata, or its error's code and message."""
    try:
        answer = call()
    except botocore.exceptions.ClientError as exc:
        return ("error", exc.response["Error"].get("Code"), exc.response["Error"].get("Message"))
    except (ValueError, KeyError) as exc:  # moto's own failure on a few expressions (raised, not answered)
        return ("raised", type(exc).__name__, str(exc))
    if isinstance(answer, dict):
        answer.pop("ResponseMetadata", None)
        if "Body" in answer:
            answer["Body"] = answer["Body"].read()
    return answer


def _as_moto_and_patched(calls: Callable[[], Any], *patches: Callable[[], None]) -> tuple[Any, Any]:
    """``calls``' answers on moto as it is, then with ``patches`` applied (undone afterwards)."""
    with mock_aws():
        as_moto = calls()
    with mock_aws():
        for apply in patches:
            apply()
        try:
            patched = calls()
        finally:
            moto_patches.undo_all()
    return as_moto, patched


def _routed_calls() -> list[Any]:
    ddb, s3, iam, sfn = (boto3.client(s, region_name=REGION) for s in ("dynamodb", "s3", "iam", "stepfunctions"))
    calls: list[Callable[[], Any]] = [
        lambda: ddb.create_table(
            TableName="t",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )["TableDescription"]["TableName"],
        lambda: ddb.put_item(TableName="t", Item={"pk": {"S": "a"}, "v": {"N": "1"}}),
        lambda: ddb.get_item(TableName="t", Key={"pk": {"S": "a"}}),
        lambda: ddb.get_item(TableName="missing", Key={"pk": {"S": "a"}}),
        lambda: s3.create_bucket(Bucket="b")["Location"],
        lambda: s3.put_object(Bucket="b", Key="a/b c%2F.txt", Body=b"one")["ETag"],
        lambda: s3.put_object(Bucket="b", Key="other", Body=b"two")["ETag"],
        lambda: s3.get_object(Bucket="b", Key="a/b c%2F.txt"),
        lambda: s3.get_object(Bucket="b", Key="nope"),
        lambda: [o["Key"] for o in s3.list_objects_v2(Bucket="b")["Contents"]],
        lambda: iam.create_role(RoleName="r", AssumeRolePolicyDocument="{}")["Role"]["RoleName"],
        lambda: iam.get_role(RoleName="r")["Role"]["Arn"],
        lambda: sfn.list_state_machines(),
    ]
    return [_answer(call) for call in calls for _ in range(2)]  # each twice: the second found again


def test_requests_routed_once_answer_as_moto_does():
    from moto.core.base_backend import BaseBackend

    with mock_aws():
        as_moto = _routed_calls()
    with mock_aws():
        moto_patches.requests_routed_once()
        searched = []
        urls = BaseBackend.urls
        BaseBackend.urls = property(lambda backend: searched.append(1) or urls.fget(backend))  # type: ignore[assignment]
        try:
            patched = _routed_calls()
        finally:
            BaseBackend.urls = urls  # type: ignore[assignment]
            moto_patches.undo_all()
    assert patched == as_moto
    assert as_moto[6][0] == "error" and as_moto[16][0] == "error"  # moto's errors, as answers
    # Each distinct URL searched once (the bucket's objects are distinct URLs), not per request.
    assert 0 < len(searched) < len(patched)


def test_a_route_is_found_again_after_a_patch_changes_a_handler():
    from moto.dynamodb.responses import DynamoHandler

    with mock_aws():
        moto_patches.requests_routed_once()
        try:
            ddb = boto3.client("dynamodb", region_name=REGION)
            assert ddb.list_tables()["TableNames"] == []
            seen = []
            original = DynamoHandler.list_tables
            moto_patches.patch(DynamoHandler, "list_tables", lambda handler: seen.append(1) or original(handler))
            assert ddb.list_tables()["TableNames"] == [] and seen == [1]
        finally:
            moto_patches.undo_all()


def _partition_story(seed: int) -> list[Any]:
    """Puts (new keys and overwrites), deletes and Queries of every kind on a growing partition."""
    rng = random.Random(seed)
    ddb = boto3.client("dynamodb", region_name=REGION)
    for name, kind in (("s", "S"), ("n", "N")):
        ddb.create_table(
            TableName=name,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": kind}],
            BillingMode="PAY_PER_REQUEST",
        )
    answers: list[Any] = []
    keys = {"s": [], "n": []}
    for step in range(400):
        table = rng.choice(["s", "n"])
        key = {"S": f"e#{rng.randint(0, 80):03d}"} if table == "s" else {"N": str(rng.randint(-40, 40) / 4)}
        move = rng.random()
        if move < 0.45:
            ddb.put_item(TableName=table, Item={"pk": {"S": "run"}, "sk": key, "step": {"N": str(step)}})
            keys[table].append(key)
        elif move < 0.55 and keys[table]:
            ddb.delete_item(TableName=table, Key={"pk": {"S": "run"}, "sk": rng.choice(keys[table])})
        else:
            low, high = sorted([key, {"S": f"e#{rng.randint(0, 80):03d}"} if table == "s" else {"N": str(rng.randint(-40, 40) / 4)}], key=str)
            condition, values = rng.choice(
                [
                    ("pk = :p", {}),
                    ("pk = :p AND sk > :a", {":a": low}),
                    ("pk = :p AND sk <= :a", {":a": low}),
                    ("pk = :p AND sk = :a", {":a": low}),
                    ("pk = :p AND sk BETWEEN :a AND :b", {":a": low, ":b": high} if str(low) <= str(high) else {":a": low, ":b": low}),
                ]
                + ([("pk = :p AND begins_with(sk, :a)", {":a": {"S": "e#0"}})] if table == "s" else [])
            )
            query: dict[str, Any] = {
                "TableName": table,
                "KeyConditionExpression": condition,
                "ExpressionAttributeValues": {":p": {"S": "run"}, **values},
                "ScanIndexForward": rng.random() < 0.5,
            }
            if rng.random() < 0.5:
                query["Limit"] = rng.randint(1, 5)
            answers.append(_answer(lambda: ddb.query(**query)))
    return answers


def test_a_partition_s_kept_order_answers_as_moto_does_while_it_grows_and_shrinks():
    for seed in (1, 2):
        partition_order.forget()
        as_moto, patched = _as_moto_and_patched(
            lambda: _partition_story(seed),  # noqa: B023 - called at once, in this iteration
            lambda: moto_patches.dynamodb_query_reads_one_partition(threading.RLock()),
        )
        assert patched == as_moto
        assert any(a.get("Items") for a in as_moto if isinstance(a, dict))


def _updates() -> list[Any]:
    ddb = boto3.client("dynamodb", region_name=REGION)
    ddb.create_table(
        TableName="u",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    key = {"pk": {"S": "run"}, "sk": {"S": "record"}}
    updates: list[dict[str, Any]] = [
        {"UpdateExpression": "SET #a = :a, #b = if_not_exists(#b, :z)", "ExpressionAttributeNames": {"#a": "a", "#b": "b"}},
        {
            "UpdateExpression": "SET #l = list_append(if_not_exists(#l, :empty), :items) ADD #n :one",
            "ExpressionAttributeNames": {"#l": "l", "#n": "n"},
        },
        {"UpdateExpression": "SET #m = :m", "ExpressionAttributeNames": {"#m": "m"}},
        {"UpdateExpression": "SET #m.#x = :a, #n = #n + :one", "ExpressionAttributeNames": {"#m": "m", "#x": "x", "#n": "n"}},
        {"UpdateExpression": "REMOVE #b ADD #s :set", "ExpressionAttributeNames": {"#b": "b", "#s": "s"}},
        {"UpdateExpression": "DELETE #s :one_of_set", "ExpressionAttributeNames": {"#s": "s"}},
        {"UpdateExpression": "SET #a = :a", "ConditionExpression": "#n = :one", "ExpressionAttributeNames": {"#a": "a", "#n": "n"}},  # fails
        {"UpdateExpression": "SET #n = :a", "ConditionExpression": "attribute_exists(#n)", "ExpressionAttributeNames": {"#n": "n"}},
        {"UpdateExpression": "SET #a = :missing", "ExpressionAttributeNames": {"#a": "a"}},  # undefined value
        {"UpdateExpression": "SET #a = :a, #a = :z", "ExpressionAttributeNames": {"#a": "a"}},  # overlapping paths
        {"UpdateExpression": "SET sk = :a"},  # a key attribute
        {"UpdateExpression": "SET size = :a"},  # a reserved word
        {"UpdateExpression": "SET #q = #nope + :one", "ExpressionAttributeNames": {"#q": "q", "#nope": "nope"}},  # no such attribute
        {"UpdateExpression": "SET #a = :a", "ExpressionAttributeNames": {"#a": "a"}, "ReturnValues": "ALL_OLD"},
    ]
    values = {
        ":a": {"S": "alpha"},
        ":z": {"S": "zero"},
        ":empty": {"L": []},
        ":items": {"L": [{"S": "i"}]},
        ":one": {"N": "1"},
        ":m": {"M": {"x": {"S": "old"}}},
        ":set": {"SS": ["p", "q"]},
        ":one_of_set": {"SS": ["p"]},
    }
    answers = []
    for update in updates:
        names = update.get("ExpressionAttributeNames", {})
        expression = update["UpdateExpression"] + " " + update.get("ConditionExpression", "")
        used = {k: v for k, v in values.items() if k in expression}
        call = dict(update, TableName="u", Key=key, ReturnValues=update.get("ReturnValues", "ALL_NEW"))
        if used:
            call["ExpressionAttributeValues"] = used
        if not names:
            call.pop("ExpressionAttributeNames", None)
        answers.append(_answer(lambda: ddb.update_item(**call)))
    answers.append(_answer(lambda: ddb.get_item(TableName="u", Key=key)))
    return answers


def test_expression_processors_reading_their_table_once_answer_as_moto_does():
    as_moto, patched = _as_moto_and_patched(_updates, moto_patches.expression_processors_map_once)
    assert patched == as_moto
    assert sum(1 for a in as_moto if isinstance(a, tuple)) >= 5  # moto's validation errors, as answers


def _conditions() -> list[Any]:
    ddb = boto3.client("dynamodb", region_name=REGION)
    ddb.create_table(
        TableName="c",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    names = {"#s": "status", "#n": "n", "#m": "m", "#x": "x"}
    conditions = [
        "attribute_not_exists(pk)",
        "attribute_exists(pk) AND #s = :done",
        "#s IN (:done, :open) OR NOT (#n > :one)",
        "#n BETWEEN :zero AND :one",
        "size(#s) > :zero AND begins_with(#s, :d)",
        "contains(#s, :d) AND #m.#x = :done",
        "(#s = :done)",
        "#s = :done AND",  # moto's error: cannot parse
        "#s == :done",  # moto's error
        "#nope = :done",  # an undefined name
        "#s = :nope",  # an undefined value
    ]
    values = {":done": {"S": "done"}, ":open": {"S": "open"}, ":one": {"N": "1"}, ":zero": {"N": "0"}, ":d": {"S": "d"}, ":nope": None}
    answers = []
    for round_ in range(2):  # the second round lexes each expression again
        for i, condition in enumerate(conditions):
            used_names = {k: v for k, v in names.items() if k in condition}
            used_values = {k: v for k, v in values.items() if k in condition and v is not None}
            item = {"pk": {"S": "p"}, "sk": {"S": f"{i % 3}"}, "status": {"S": "done"}, "n": {"N": str(round_)}, "m": {"M": {"x": {"S": "done"}}}}
            call: dict[str, Any] = {"TableName": "c", "Item": item, "ConditionExpression": condition}
            if used_names:
                call["ExpressionAttributeNames"] = used_names
            if used_values:
                call["ExpressionAttributeValues"] = used_values
            answers.append(_answer(lambda: ddb.put_item(**call)))
            query: dict[str, Any] = {
                "TableName": "c",
                "KeyConditionExpression": "pk = :p AND sk >= :a",
                "FilterExpression": condition,
                "ExpressionAttributeValues": {":p": {"S": "p"}, ":a": {"S": "0"}, **used_values},
            }
            if used_names:
                query["ExpressionAttributeNames"] = used_names
            answers.append(_answer(lambda: ddb.query(**query)))
    return answers


def test_condition_expressions_lexed_once_answer_as_moto_does():
    as_moto, patched = _as_moto_and_patched(_conditions, moto_patches.condition_expressions_lex_once)
    assert patched == as_moto
    assert sum(1 for a in as_moto if isinstance(a, tuple)) >= 8  # failed conditions and moto's errors
    assert any(isinstance(a, dict) and a.get("Items") for a in as_moto)


def _shape(node: Any, seen: dict[int, int]) -> Any:
    """A tree's classes, attributes and shared references, comparable across copies."""
    from moto.dynamodb.parsing.ast_nodes import Node

    if isinstance(node, list):
        return ["list", [_shape(child, seen) for child in node]]
    if not isinstance(node, Node):
        return node
    if id(node) in seen:
        return ["seen", seen[id(node)]]
    seen[id(node)] = len(seen)
    return [type(node).__name__, {name: _shape(value, seen) for name, value in vars(node).items()}]


def test_expression_trees_copied_directly_are_deepcopy_s_copies():
    import copy

    from moto.dynamodb.parsing import validators
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser

    expressions = [
        "SET #a = :a, #b = if_not_exists(#b, :z)",
        "SET #l = list_append(if_not_exists(#l, :empty), :items) ADD #n :one",
        "SET #m.#x[2].y = :a, #n = #n + :one REMOVE #b, c[1] DELETE #s :set",
    ]
    trees = [UpdateExpressionParser.make(e) for e in expressions]
    as_deepcopy = [copy.deepcopy(t) for t in trees]
    moto_patches.expression_trees_copied_directly()
    try:
        direct = [validators.deepcopy(t) for t in trees]
    finally:
        moto_patches.undo_all()
    for tree, theirs, ours in zip(trees, as_deepcopy, direct):
        assert _shape(ours, {}) == _shape(theirs, {}) == _shape(tree, {})
        assert ours is not tree and ours.children[0] is not tree.children[0]
        assert ours.children[0].parent is ours  # the parent link points into the copy


def test_expression_trees_copied_directly_answer_as_moto_does():
    as_moto, patched = _as_moto_and_patched(_updates, moto_patches.expression_processors_map_once, moto_patches.expression_trees_copied_directly)
    assert patched == as_moto
