"""The sample agent's world: documents, tickets and an outbox, three DynamoDB tables it declares.

The stack creates them from these declarations (``longstep.resources``) and grants them to the
triage agent's tool functions only; the tools find each table's physical name through
``Table.table_name``. Also the world's fixtures (what a scenario's ``world`` may hold) and their
loader, which the local stack runs with the environment of the agent's CallTool function.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from longstep import READ_ITEM_ACTIONS, READ_WRITE_ITEM_ACTIONS, SCAN_ACTIONS, Table, clients

# search_docs reads the documents whole (Scan); read_document gets one.
DOCUMENTS = Table("documents", partition_key="doc_id", actions=READ_ITEM_ACTIONS + SCAN_ACTIONS)
# One item per idempotency key the filing tool was given; updates append to the item's log.
TICKETS = Table("tickets", partition_key="ticket_id", actions=READ_WRITE_ITEM_ACTIONS)
# Every physical email send appends one item (the outbox cannot tell two sends apart); send_email's
# probe scans it for the interrupted call's idempotency key.
OUTBOX = Table("outbox", partition_key="message_id", actions=("dynamodb:PutItem",) + SCAN_ACTIONS)

# A DynamoDB item holds at most 400 KB, attribute names included
# (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Constraints.html#limits-items);
# a body above this is stored in parts of this size, each in its own item, and read back whole.
PART_BYTES = 350 * 1024

RESOURCES = (DOCUMENTS, TICKETS, OUTBOX)


def documents() -> str:
    return DOCUMENTS.table_name


def tickets() -> str:
    return TICKETS.table_name


def outbox() -> str:
    return OUTBOX.table_name


def ddb() -> Any:
    return clients.client("dynamodb")


def part_id(doc_id: str, index: int) -> str:
    """The key of part ``index`` of a document too large for one item."""
    return f"{doc_id}#part{index}"


def read_body(item: dict[str, Any]) -> str:
    """A document's whole body: inline, or joined from its parts."""
    parts = int(item.get("parts", {}).get("N", "0"))
    if not parts:
        return item["body"]["S"]
    chunks = []
    for index in range(parts):
        part = ddb().get_item(TableName=documents(), Key={"doc_id": {"S": part_id(item["doc_id"]["S"], index)}}, ConsistentRead=True)["Item"]
        chunks.append(part["chunk"]["B"])
    return b"".join(chunks).decode("utf-8")


# -- fixtures ------------------------------------------------------------------------------------


class DocumentSeed(BaseModel):
    """A document put into the documents table; ``body`` is repeated ``repeat`` times."""

    model_config = ConfigDict(extra="forbid")

    doc_id: str = Field(min_length=1, pattern=r"^[^#]+$")
    title: str = Field(min_length=1)
    summary: str = ""
    body: str = ""
    repeat: int = Field(default=1, ge=1, le=100_000)

    def full_body(self) -> str:
        return self.body * self.repeat


class TicketSeed(BaseModel):
    """An existing ticket in the backlog."""

    model_config = ConfigDict(extra="forbid")

    ticket_id: str = Field(min_length=1)
    title: str = Field(min_length=1)
    body: str = ""
    priority: str = "P3"
    status: str = "open"


class TriageWorld(BaseModel):
    """What the sample world holds before a run starts (a scenario's ``world``)."""

    model_config = ConfigDict(extra="forbid")

    documents: list[DocumentSeed] = Field(default_factory=list)
    tickets: list[TicketSeed] = Field(default_factory=list)


def put_document(doc: DocumentSeed) -> None:
    """Store a document where ``search_docs`` and ``read_document`` find it, in parts if it is large."""
    item = {"doc_id": {"S": doc.doc_id}, "title": {"S": doc.title}, "summary": {"S": doc.summary}}
    body = doc.full_body()
    data = body.encode("utf-8")
    if len(data) <= PART_BYTES:
        ddb().put_item(TableName=documents(), Item={**item, "body": {"S": body}})
        return
    # Byte parts (Binary attributes), so a part boundary may fall inside a multi-byte character.
    chunks = [data[i : i + PART_BYTES] for i in range(0, len(data), PART_BYTES)]
    for index, chunk in enumerate(chunks):
        ddb().put_item(TableName=documents(), Item={"doc_id": {"S": part_id(doc.doc_id, index)}, "part_of": {"S": doc.doc_id}, "chunk": {"B": chunk}})
    ddb().put_item(TableName=documents(), Item={**item, "parts": {"N": str(len(chunks))}})


def load_world(world: TriageWorld) -> None:
    """The fixture loader: put the scenario's documents and tickets into the world tables."""
    for doc in world.documents:
        put_document(doc)
    for ticket in world.tickets:
        ddb().put_item(
            TableName=tickets(),
            Item={
                "ticket_id": {"S": ticket.ticket_id},
                "title": {"S": ticket.title},
                "body": {"S": ticket.body},
                "priority": {"S": ticket.priority},
                "status": {"S": ticket.status},
            },
        )


def scan(table_name: str, **kwargs: Any) -> list[dict[str, Any]]:
    """Every item of a world table (paginated)."""
    items: list[dict[str, Any]] = []
    kwargs = {"TableName": table_name, **kwargs}
    while True:
        page = ddb().scan(**kwargs)
        items.extend(page.get("Items", []))
        if "LastEvaluatedKey" not in page:
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
