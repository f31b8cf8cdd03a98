"""Long-term memory: facts an agent keeps across runs, in a table of its own.

Memories are namespaced per agent, and per user when the start input names one. A run reads its
namespace once, at Init, into its run record, so every model call of the run (and every replay)
sees the same memories; ``remember`` writes for the runs that come after.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from longstep import clock
from longstep import codec, keys

REMEMBER = "remember"
RECALL = "recall"
# Memories loaded into the system prompt at run start (the most recently written first).
PROMPT_MEMORIES = 50


class RememberArgs(BaseModel):
    """Keep a fact for later runs."""

    model_config = ConfigDict(extra="forbid")

    key: str = Field(min_length=1, max_length=200, description="what the fact is about; the same key replaces it")
    value: str = Field(min_length=1, max_length=4_000)


class RecallArgs(BaseModel):
    """Look up kept facts."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(default="", max_length=200, description="words the key or value must contain (empty: all)")
    limit: int = Field(default=20, ge=1, le=100)


def namespace(agent: str, user: str | None) -> str:
    """Memories are kept per agent, and per user when the run names one."""
    return f"{agent}#user#{user}" if user else agent


class MemoryStore:
    """The memory table.

    Args:
        table_name: the memory table.
        client: a boto3 DynamoDB client.
    """

    def __init__(self, table_name: str, client: Any) -> None:
        self.table_name = table_name
        self.client = client
        self._schema = keys.memory_table()

    def put(self, space: str, key: str, value: str, run_id: str) -> dict[str, Any]:
        """Keep ``value`` under ``key`` (replacing an earlier value: repeating it is harmless)."""
        self.client.put_item(
            TableName=self.table_name,
            Item=codec.attributes(
                {self._schema.partition_key: space, self._schema.sort_key: key, "value": value, "run_id": run_id, "written_at": clock.now()}
            ),
        )
        return {"key": key, "remembered": True}

    def all(self, space: str) -> list[dict[str, Any]]:
        """Every memory of a namespace, most recently written first."""
        items: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "#ns = :ns",
            "ExpressionAttributeNames": {"#ns": self._schema.partition_key},
            "ExpressionAttributeValues": {":ns": {"S": space}},
        }
        while True:
            page = self.client.query(**kwargs)
            items.extend(page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        rows = [codec.plain(i) for i in items]
        memories = [{"key": r[self._schema.sort_key], "value": r["value"], "written_at": float(r["written_at"])} for r in rows]
        return sorted(memories, key=lambda m: (-m["written_at"], m["key"]))

    def recall(self, space: str, query: str, limit: int) -> list[dict[str, str]]:
        """Memories whose key or value contains every word of ``query``."""
        words = query.lower().split()
        found = [m for m in self.all(space) if all(w in f"{m['key']} {m['value']}".lower() for w in words)]
        return [{"key": m["key"], "value": m["value"]} for m in found[:limit]]


def prompt_block(memories: list[dict[str, str]]) -> str:
    """The memories as a paragraph of the system prompt ('' when there are none)."""
    if not memories:
        return ""
    lines = "\n".join(f"- {m['key']}: {m['value']}" for m in memories)
    return f"\n\nWhat you remember from earlier runs:\n{lines}"
