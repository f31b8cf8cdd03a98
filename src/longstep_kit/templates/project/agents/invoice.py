"""An example agent: it records invoices in a table of its own and reconciles them.

Each tool says how it stays safe when a crash makes it run again: listing is a read, recording
is keyed (the table refuses a second item for the same idempotency key), and marking an invoice
paid checks before it acts.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from longstep import clients
from longstep.agent import Agent
from longstep.errors import ToolInputError
from longstep.resources import READ_WRITE_ITEM_ACTIONS, SCAN_ACTIONS, Table
from longstep.tools.registry import Effect, ToolContext, ToolRegistry, tool

# The stack creates this table for this agent and grants these actions to its tool functions only.
INVOICES = Table("invoices", partition_key="invoice_id", actions=READ_WRITE_ITEM_ACTIONS + SCAN_ACTIONS)

registry = ToolRegistry()


def _ddb() -> Any:
    return clients.client("dynamodb")


class RecordInvoiceArgs(BaseModel):
    vendor: str = Field(min_length=1, max_length=100)
    amount_cents: int = Field(gt=0, le=100_000_000)


@tool(registry, effect=Effect.KEYED)
def record_invoice(args: RecordInvoiceArgs, ctx: ToolContext) -> dict[str, Any]:
    """Record an invoice; returns its id (derived from the idempotency key: a repeat is a no-op)."""
    invoice_id = "INV-" + ctx.idempotency_key.replace(":", "-")
    try:
        _ddb().put_item(
            TableName=INVOICES.table_name,
            Item={
                "invoice_id": {"S": invoice_id},
                "vendor": {"S": args.vendor},
                "amount_cents": {"N": str(args.amount_cents)},
                "status": {"S": "open"},
                "run_id": {"S": ctx.run_id},
            },
            ConditionExpression="attribute_not_exists(invoice_id)",
        )
    except _ddb().exceptions.ConditionalCheckFailedException:
        pass  # recorded by an earlier attempt of this very call
    return {"invoice_id": invoice_id, "vendor": args.vendor, "amount_cents": args.amount_cents}


class ListInvoicesArgs(BaseModel):
    status: str = Field(default="open", pattern=r"^(open|paid)$")


@tool(registry, effect=Effect.READ)
def list_invoices(args: ListInvoicesArgs, ctx: ToolContext) -> dict[str, Any]:
    """List the invoices with a status, by id."""
    items = _ddb().scan(TableName=INVOICES.table_name, ConsistentRead=True)["Items"]
    found = sorted(i["invoice_id"]["S"] for i in items if i["status"]["S"] == args.status)
    return {"status": args.status, "invoices": found}


class MarkPaidArgs(BaseModel):
    invoice_id: str = Field(min_length=1)


def already_paid(args: MarkPaidArgs, ctx: ToolContext) -> dict[str, Any] | None:
    """The check of check_then_act: is the invoice paid already?"""
    item = _ddb().get_item(TableName=INVOICES.table_name, Key={"invoice_id": {"S": args.invoice_id}}, ConsistentRead=True).get("Item")
    if item is None:
        raise ToolInputError(f"invoice_id: no invoice {args.invoice_id!r}")
    return {"invoice_id": args.invoice_id, "status": "paid"} if item["status"]["S"] == "paid" else None


@tool(registry, effect=Effect.CHECK_THEN_ACT, check=already_paid)
def mark_paid(args: MarkPaidArgs, ctx: ToolContext) -> dict[str, Any]:
    """Mark an invoice paid."""
    _ddb().update_item(
        TableName=INVOICES.table_name,
        Key={"invoice_id": {"S": args.invoice_id}},
        UpdateExpression="SET #s = :paid",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":paid": {"S": "paid"}},
    )
    return {"invoice_id": args.invoice_id, "status": "paid"}


def build() -> Agent:
    """The invoice agent (cdk.json: ``"agents": {"invoice": "agents.invoice:build"}``)."""
    return Agent(
        name="invoice",
        system_prompt="You keep the invoice book: record invoices, mark them paid, and finish with a short summary.",
        tools=registry,
        resources=(INVOICES,),
    )
