"""The DynamoDB requests the saver makes on its table: Query and Scan page by page, batched reads
and writes with their unprocessed keys sent again, and a conditional put.

Every read is strongly consistent: a checkpoint written is read back by the next step.
"""

from __future__ import annotations

import time
from typing import Any, Iterator

# BatchWriteItem takes at most 25 put or delete requests; what DynamoDB leaves unprocessed is
# sent again with exponential backoff
# (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchWriteItem.html).
BATCH_WRITE_ITEMS = 25
# BatchGetItem takes at most 100 keys, and returns unprocessed ones past 16 MB or throttling
# (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchGetItem.html).
BATCH_GET_KEYS = 100
MAX_ROUNDS = 8


class Table:
    """One DynamoDB table with string keys ``pk`` and ``sk`` (Longstep's checkpoint table layout).

    Args:
        client: a boto3 DynamoDB client.
        name: the table.
    """

    def __init__(self, client: Any, name: str) -> None:
        self.client = client
        self.name = name

    def query(
        self,
        pk: str,
        prefix: str,
        *,
        below: str | None = None,
        between: tuple[str, str] | None = None,
        descending: bool = False,
        page_size: int | None = None,
        keys_only: bool = False,
    ) -> Iterator[dict[str, Any]]:
        """The items of partition ``pk`` whose sort key starts with ``prefix`` (and, with
        ``below``, is less than it: then newest first; with ``between``, is within its bounds), in key order or reversed, one Query page after another.

        A Query returns at most 1 MB a page and a ``LastEvaluatedKey`` while more may follow
        (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Query.Pagination.html);
        the caller stops reading when it has what it needs, and no further page is asked for.
        """
        values: dict[str, Any] = {":pk": {"S": pk}, ":prefix": {"S": prefix}}
        condition = "pk = :pk AND begins_with(sk, :prefix)"
        if not prefix:  # the whole partition (an empty string is no key condition's operand)
            condition = "pk = :pk"
            del values[":prefix"]
        elif between is not None:  # both bounds start with the prefix: so does every key between them
            condition, values[":low"], values[":high"] = "pk = :pk AND sk BETWEEN :low AND :high", {"S": min(between)}, {"S": max(between)}
            del values[":prefix"]
        elif below is not None:
            # A key condition takes one comparison of the sort key: below the bound, read newest
            # first; the keys starting with the prefix are one range, so the first key past it ends it.
            condition, values[":below"] = "pk = :pk AND sk < :below", {"S": below}
            del values[":prefix"]
        kwargs: dict[str, Any] = {
            "TableName": self.name,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": values,
            "ConsistentRead": True,
            "ScanIndexForward": not (descending or below is not None),
        }
        if page_size:
            kwargs["Limit"] = page_size
        if keys_only:
            kwargs["ProjectionExpression"] = "pk, sk"
        while True:
            resp = self.client.query(**kwargs)
            for item in resp.get("Items", []):
                if not item["sk"]["S"].startswith(prefix):
                    return
                yield item
            if "LastEvaluatedKey" not in resp:
                return
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    def scan(
        self, filter_expression: str, values: dict[str, Any], projection: str | None = None, names: dict[str, str] | None = None
    ) -> Iterator[dict[str, Any]]:
        """Every item of the table that passes ``filter_expression``, page by page (a Scan reads
        the whole table: for the operations across threads only)."""
        kwargs: dict[str, Any] = {
            "TableName": self.name,
            "FilterExpression": filter_expression,
            "ExpressionAttributeValues": values,
            "ConsistentRead": True,
        }
        if names:
            kwargs["ExpressionAttributeNames"] = names
        if projection:
            kwargs["ProjectionExpression"] = projection
        while True:
            resp = self.client.scan(**kwargs)
            yield from resp.get("Items", [])
            if "LastEvaluatedKey" not in resp:
                return
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    def get_many(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], dict[str, Any]]:
        """Items by ``(pk, sk)``, strongly consistent, 100 keys a BatchGetItem; absent ones left out."""
        out: dict[tuple[str, str], dict[str, Any]] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), BATCH_GET_KEYS):
            chunk = [{"pk": {"S": p}, "sk": {"S": s}} for p, s in unique[start : start + BATCH_GET_KEYS]]
            wanted: dict[str, Any] = {self.name: {"Keys": chunk, "ConsistentRead": True}}
            for attempt in range(MAX_ROUNDS):
                resp = self.client.batch_get_item(RequestItems=wanted)
                for item in resp.get("Responses", {}).get(self.name, []):
                    out[(item["pk"]["S"], item["sk"]["S"])] = item
                wanted = resp.get("UnprocessedKeys") or {}
                if not wanted:
                    break
                _backoff(attempt)
            else:
                raise TimeoutError(f"BatchGetItem on {self.name}: keys still unprocessed after {MAX_ROUNDS} requests")
        return out

    def write_many(self, puts: list[dict[str, Any]] = (), deletes: list[tuple[str, str]] = ()) -> None:  # type: ignore[assignment]
        """Put and delete items, 25 a BatchWriteItem, unprocessed ones sent again. A batch is not
        atomic: callers order their batches so that what a reader needs is written first."""
        requests = [{"PutRequest": {"Item": item}} for item in puts]
        requests += [{"DeleteRequest": {"Key": {"pk": {"S": p}, "sk": {"S": s}}}} for p, s in deletes]
        for start in range(0, len(requests), BATCH_WRITE_ITEMS):
            pending: dict[str, Any] = {self.name: requests[start : start + BATCH_WRITE_ITEMS]}
            for attempt in range(MAX_ROUNDS):
                pending = self.client.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
                if not pending:
                    break
                _backoff(attempt)
            else:
                raise TimeoutError(f"BatchWriteItem on {self.name}: items still unprocessed after {MAX_ROUNDS} requests")

    def put(self, item: dict[str, Any]) -> None:
        """One PutItem, replacing any item of the same key."""
        self.client.put_item(TableName=self.name, Item=item)

    def put_new(self, item: dict[str, Any]) -> bool:
        """One PutItem unless the key exists (a condition checked atomically with the write:
        https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ConditionExpressions.html);
        whether it was written."""
        try:
            self.client.put_item(TableName=self.name, Item=item, ConditionExpression="attribute_not_exists(pk)")
        except self.client.exceptions.ConditionalCheckFailedException:
            return False
        return True


def _backoff(attempt: int) -> None:
    time.sleep(min(0.05 * 2**attempt, 2.0))
