"""Table key schemas: the single definition used by the CDK stack, the runtime and the tests."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TableSchema:
    """Key layout of one DynamoDB table.

    Attributes:
        partition_key: name of the string partition key.
        sort_key: name of the string sort key, or None for a hash-only table.
        ttl_attribute: the attribute DynamoDB TTL reads (epoch seconds), or None.
    """

    partition_key: str
    sort_key: str | None = None
    ttl_attribute: str | None = None

    def key_schema(self) -> list[dict[str, str]]:
        """The ``KeySchema`` argument of DynamoDB ``CreateTable``."""
        schema = [{"AttributeName": self.partition_key, "KeyType": "HASH"}]
        if self.sort_key:
            schema.append({"AttributeName": self.sort_key, "KeyType": "RANGE"})
        return schema

    def attribute_definitions(self) -> list[dict[str, str]]:
        """The ``AttributeDefinitions`` argument of DynamoDB ``CreateTable`` (all keys are strings)."""
        return [{"AttributeName": k["AttributeName"], "AttributeType": "S"} for k in self.key_schema()]


def checkpoint_table() -> TableSchema:
    """Runs and their recorded steps: ``pk`` is the run id, ``sk`` the record within the run."""
    return TableSchema(partition_key="pk", sort_key="sk", ttl_attribute="expires_at")


def idempotency_table() -> TableSchema:
    """The Powertools idempotency persistence layout (its defaults: ``id`` and ``expiration``)."""
    return TableSchema(partition_key="id", ttl_attribute="expiration")


def tickets_table() -> TableSchema:
    """Sample world: tickets, one item per idempotency key the filing tool was given."""
    return TableSchema(partition_key="ticket_id")


def outbox_table() -> TableSchema:
    """Sample world: every physical email send appends one item."""
    return TableSchema(partition_key="message_id")


def documents_table() -> TableSchema:
    """Sample world: the documents the triage agent searches and reads."""
    return TableSchema(partition_key="doc_id")


# Sort-key layout of the checkpoint table; zero-padding keeps a run's steps in order.
RUN_RECORD = "run"
FINAL_RECORD = "final"
STEP_PREFIX = "step#"


def model_step_key(turn: int) -> str:
    """Sort key of the model reply recorded for ``turn``."""
    return f"{STEP_PREFIX}{turn:06d}#model"


def tool_step_key(turn: int, call: int) -> str:
    """Sort key of the result of tool call ``call`` in ``turn``."""
    return f"{STEP_PREFIX}{turn:06d}#tool#{call:03d}"


def intent_key(turn: int, call: int) -> str:
    """Sort key of the intent marker an at-most-once tool writes before it acts."""
    return f"intent#{turn:06d}#{call:03d}"


def approval_key(turn: int, call: int) -> str:
    """Sort key of the approval request for tool call ``call`` in ``turn``."""
    return f"approval#{turn:06d}#{call:03d}"


def escalation_key(turn: int, call: int) -> str:
    """Sort key of the escalation of a step (``call`` -1 for the model turn itself)."""
    return f"escalation#{turn:06d}#{call:03d}"


def idempotency_key(run_id: str, turn: int, call: int | None = None) -> str:
    """The idempotency key of a step: ``run_id:seq`` for a model turn, ``run_id:seq:call`` for a tool."""
    return f"{run_id}:{turn}" if call is None else f"{run_id}:{turn}:{call}"
