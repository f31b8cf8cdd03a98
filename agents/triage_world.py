"""The sample agent's world: documents, tickets and an outbox, three DynamoDB tables it declares.

The stack creates them from these declarations (``longstep.resources``) and grants them to the
triage agent's tool functions only; the tools find each table's physical name through
``Table.table_name``.
"""

from __future__ import annotations

from typing import Any

from longstep import clients
from longstep.resources import READ_ITEM_ACTIONS, READ_WRITE_ITEM_ACTIONS, SCAN_ACTIONS, Table

# search_docs reads the documents whole (Scan); read_document gets one.
DOCUMENTS = Table("documents", partition_key="doc_id", actions=READ_ITEM_ACTIONS + SCAN_ACTIONS)
# One item per idempotency key the filing tool was given; updates append to the item's log.
TICKETS = Table("tickets", partition_key="ticket_id", actions=READ_WRITE_ITEM_ACTIONS)
# Every physical email send appends one item (the outbox cannot tell two sends apart).
OUTBOX = Table("outbox", partition_key="message_id", actions=("dynamodb:PutItem",))

RESOURCES = (DOCUMENTS, TICKETS, OUTBOX)


def documents() -> str:
    return DOCUMENTS.table_name


def tickets() -> str:
    return TICKETS.table_name


def outbox() -> str:
    return OUTBOX.table_name


def ddb() -> Any:
    return clients.client("dynamodb")
