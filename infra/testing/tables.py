"""An agent's own tables after a local run: what its tools wrote, read as the operator."""

from __future__ import annotations

from typing import Any


def agent_items(stack: Any, agent: str, table: str) -> list[dict[str, Any]]:
    """Every item of ``agent``'s declared table ``table`` (its name in ``Table(...)``), as plain values.

    Args:
        stack: a started :class:`~longstep_kit.local.stack.LocalStack` (or anything with ``client``
            and the agent's CallTool function deployed).
        agent: the agent's name.
        table: the declared table's name, e.g. ``tickets``.

    Raises:
        KeyError: the agent declares no such table (the message lists the ones it does).
    """
    from boto3.dynamodb.types import TypeDeserializer

    from longstep_kit.local.resources import agent_tables

    tables = agent_tables(stack, agent)
    if table.lower() not in tables:
        raise KeyError(f"agent {agent!r} declares no table {table!r}; it declares: {', '.join(sorted(tables)) or 'none'}")
    ddb, plain = stack.client("dynamodb"), TypeDeserializer()
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": tables[table.lower()]}
    while True:
        page = ddb.scan(**kwargs)
        items += [{k: plain.deserialize(v) for k, v in item.items()} for item in page.get("Items", [])]
        if "LastEvaluatedKey" not in page:
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
