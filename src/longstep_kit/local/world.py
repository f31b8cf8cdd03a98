"""The sample world on the local stack: seeding it, and reading back what a tool did."""

from __future__ import annotations

from typing import Any

from longstep_kit.local.resources import agent_tables
from longstep_kit.local.scenario import Scenario
from longstep_kit.local.stack import LocalStack

SAMPLE_AGENT = "triage"  # this module seeds and reads the sample's world (to be replaced by agent fixtures)


def seed_world(stack: LocalStack, scenario: Scenario) -> None:
    """Put the scenario's documents and tickets into the world tables."""
    if not scenario.world.documents and not scenario.world.tickets:
        return  # nothing to seed (and another agent has no such tables)
    ddb = stack.client("dynamodb")
    tables = agent_tables(stack, SAMPLE_AGENT)
    for doc in scenario.world.documents:
        ddb.put_item(
            TableName=tables["documents"],
            Item={
                "doc_id": {"S": doc.doc_id},
                "title": {"S": doc.title},
                "summary": {"S": doc.summary},
                "body": {"S": doc.full_body()},
            },
        )
    for ticket in scenario.world.tickets:
        ddb.put_item(
            TableName=tables["tickets"],
            Item={
                "ticket_id": {"S": ticket.ticket_id},
                "title": {"S": ticket.title},
                "body": {"S": ticket.body},
                "priority": {"S": ticket.priority},
                "status": {"S": ticket.status},
            },
        )


def read_back(stack: LocalStack, tool: str, idempotency_key: str) -> dict[str, Any] | None:
    """What an interrupted at-most-once call did, read from the world as a human would check.

    Returns:
        The result the tool would have returned if its effect happened, else None.
    """
    if tool != "send_email":
        return None
    from agents.triage import sent_result  # the sample agent's own result shape

    rows = stack.client("dynamodb").scan(
        TableName=agent_tables(stack, SAMPLE_AGENT)["outbox"],
        FilterExpression="idempotency_key = :k",
        ExpressionAttributeValues={":k": {"S": idempotency_key}},
    )["Items"]
    if not rows:
        return None
    return sent_result(rows[0]["to"]["S"], rows[0]["subject"]["S"])
