"""An example agent: it keeps an invoice book in a table of its own and pays invoices.

Each tool says how it stays safe when a crash makes it run again: listing is a read; recording is
keyed (the book refuses a second item for the same idempotency key); marking an invoice paid
checks before it acts; paying can happen at most once and needs a human's approval. When a crash
leaves a payment's outcome unknown, the payment's probe asks the payments table whether a
payment with the call's reference exists. Every tool that acts lists what it did in a ledger, from
which ``longstep local run`` counts duplicates.
"""

from __future__ import annotations

import uuid
from typing import Any, Iterator

from pydantic import BaseModel, ConfigDict, Field

from longstep import (
    READ_WRITE_ITEM_ACTIONS,
    SCAN_ACTIONS,
    Agent,
    Effect,
    LedgerEntry,
    ProbeAnswer,
    Table,
    ToolContext,
    ToolInputError,
    ToolRegistry,
    World,
    clients,
    tool,
)

# The stack creates these tables for this agent and grants these actions to its tool functions only.
INVOICES = Table("invoices", partition_key="invoice_id", actions=READ_WRITE_ITEM_ACTIONS + SCAN_ACTIONS)
# Stands in for a payment system: every payment is a new item (it cannot tell two payments apart),
# found by the reference it was made with (the call's idempotency key).
PAYMENTS = Table("payments", partition_key="reference", sort_key="payment_id", actions=("dynamodb:PutItem", "dynamodb:Query"))

registry = ToolRegistry()


def _ddb() -> Any:
    return clients.client("dynamodb")


def _scan(table: Table) -> Iterator[dict[str, Any]]:
    """Every item of ``table``, strongly consistent (a stale page would miss a fresh write)."""
    for page in _ddb().get_paginator("scan").paginate(TableName=table.table_name, ConsistentRead=True):
        yield from page.get("Items", [])


# -- read ----------------------------------------------------------------------------------------


class ListInvoicesArgs(BaseModel):
    status: str = Field(default="open", pattern=r"^(open|paid)$")


@tool(registry, effect=Effect.READ)
def list_invoices(args: ListInvoicesArgs, ctx: ToolContext) -> dict[str, Any]:
    """List the invoices with a status, by id."""
    found = sorted(i["invoice_id"]["S"] for i in _scan(INVOICES) if i["status"]["S"] == args.status)
    return {"status": args.status, "invoices": found}


# -- keyed ---------------------------------------------------------------------------------------


class RecordInvoiceArgs(BaseModel):
    vendor: str = Field(min_length=1, max_length=100)
    amount_cents: int = Field(gt=0, le=100_000_000)


def invoices_recorded(run_id: str) -> Iterator[LedgerEntry]:
    """The ledger of record_invoice: every invoice the run recorded, with its key."""
    for item in _scan(INVOICES):
        if item.get("run_id", {}).get("S") == run_id:
            yield LedgerEntry(idempotency_key=item["recorded_with"]["S"], run_id=run_id)


@tool(registry, effect=Effect.KEYED, ledger=invoices_recorded)
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
                "recorded_with": {"S": ctx.idempotency_key},
            },
            ConditionExpression="attribute_not_exists(invoice_id)",
        )
    except _ddb().exceptions.ConditionalCheckFailedException:
        pass  # recorded by an earlier attempt of this very call
    return {"invoice_id": invoice_id, "vendor": args.vendor, "amount_cents": args.amount_cents}


# -- check then act ------------------------------------------------------------------------------


class MarkPaidArgs(BaseModel):
    invoice_id: str = Field(min_length=1)


def _invoice(invoice_id: str) -> dict[str, Any]:
    item = _ddb().get_item(TableName=INVOICES.table_name, Key={"invoice_id": {"S": invoice_id}}, ConsistentRead=True).get("Item")
    if item is None:
        raise ToolInputError(f"invoice_id: no invoice {invoice_id!r}")
    return item


def already_paid(args: MarkPaidArgs, ctx: ToolContext) -> dict[str, Any] | None:
    """The check of check_then_act: is the invoice marked paid already?"""
    return {"invoice_id": args.invoice_id, "status": "paid"} if _invoice(args.invoice_id)["status"]["S"] == "paid" else None


def invoices_marked_paid(run_id: str) -> Iterator[LedgerEntry]:
    """The ledger of mark_paid: one entry per time the run marked an invoice paid."""
    for item in _scan(INVOICES):
        for key in item.get("paid_log", {}).get("L", []):
            if key["S"].startswith(f"{run_id}:"):
                yield LedgerEntry(idempotency_key=key["S"], run_id=run_id)


@tool(registry, effect=Effect.CHECK_THEN_ACT, check=already_paid, ledger=invoices_marked_paid)
def mark_paid(args: MarkPaidArgs, ctx: ToolContext) -> dict[str, Any]:
    """Mark an invoice paid in the book."""
    _ddb().update_item(
        TableName=INVOICES.table_name,
        Key={"invoice_id": {"S": args.invoice_id}},
        UpdateExpression="SET #s = :paid, paid_log = list_append(if_not_exists(paid_log, :empty), :key)",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":paid": {"S": "paid"}, ":empty": {"L": []}, ":key": {"L": [{"S": ctx.idempotency_key}]}},
    )
    return {"invoice_id": args.invoice_id, "status": "paid"}


# -- at most once, with approval and a probe -----------------------------------------------------


class PayInvoiceArgs(BaseModel):
    invoice_id: str = Field(min_length=1)


def paid_result(invoice_id: str, amount_cents: int, reference: str) -> dict[str, Any]:
    """What the model is told after a payment (also what the probe answers after a crash)."""
    return {"paid": invoice_id, "amount_cents": amount_cents, "reference": reference}


def _payments_with(reference: str) -> list[dict[str, Any]]:
    # Strongly consistent: a stale "no payment" would make the probe pay twice
    # (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_Query.html, ConsistentRead).
    return _ddb().query(
        TableName=PAYMENTS.table_name,
        KeyConditionExpression="#r = :r",
        ExpressionAttributeNames={"#r": "reference"},
        ExpressionAttributeValues={":r": {"S": reference}},
        ConsistentRead=True,
    )["Items"]


def payment_made(args: PayInvoiceArgs, ctx: ToolContext) -> ProbeAnswer:
    """The probe of pay_invoice: is there a payment made with this call's reference?"""
    found = _payments_with(ctx.idempotency_key)
    if not found:
        return ProbeAnswer.not_happened()
    return ProbeAnswer.happened_with(paid_result(found[0]["invoice_id"]["S"], int(found[0]["amount_cents"]["N"]), ctx.idempotency_key))


def payments_made(run_id: str) -> Iterator[LedgerEntry]:
    """The ledger of pay_invoice: one entry per payment the run made (two under one reference: a duplicate)."""
    for item in _scan(PAYMENTS):
        if item["run_id"]["S"] == run_id:
            yield LedgerEntry(idempotency_key=item["reference"]["S"], run_id=run_id)


@tool(registry, effect=Effect.AT_MOST_ONCE, requires_approval=True, probe=payment_made, ledger=payments_made)
def pay_invoice(args: PayInvoiceArgs, ctx: ToolContext) -> dict[str, Any]:
    """Pay an invoice's amount to its vendor. A human approves each payment before it is made."""
    amount = int(_invoice(args.invoice_id)["amount_cents"]["N"])
    _ddb().put_item(
        TableName=PAYMENTS.table_name,
        Item={
            "reference": {"S": ctx.idempotency_key},
            "payment_id": {"S": str(uuid.uuid4())},  # a new payment every time: the system does not deduplicate
            "invoice_id": {"S": args.invoice_id},
            "amount_cents": {"N": str(amount)},
            "run_id": {"S": ctx.run_id},
        },
    )
    return paid_result(args.invoice_id, amount, ctx.idempotency_key)


# -- the world a scenario may seed ---------------------------------------------------------------


class InvoiceSeed(BaseModel):
    """An invoice already in the book before the run."""

    model_config = ConfigDict(extra="forbid")

    invoice_id: str = Field(min_length=1)
    vendor: str = Field(min_length=1)
    amount_cents: int = Field(gt=0)
    status: str = Field(default="open", pattern=r"^(open|paid)$")


class InvoiceWorld(BaseModel):
    """A scenario's ``world``: the invoice book before the run."""

    model_config = ConfigDict(extra="forbid")

    invoices: list[InvoiceSeed] = Field(default_factory=list)


def load_world(world: InvoiceWorld) -> None:
    """Put the scenario's invoices into the book (the local stack runs this with the tools' environment)."""
    for seed in world.invoices:
        _ddb().put_item(
            TableName=INVOICES.table_name,
            Item={
                "invoice_id": {"S": seed.invoice_id},
                "vendor": {"S": seed.vendor},
                "amount_cents": {"N": str(seed.amount_cents)},
                "status": {"S": seed.status},
            },
        )


def build() -> Agent:
    """The invoice agent (cdk.json: ``"agents": {"invoice": "functions.invoice:build"}``)."""
    return Agent(
        name="invoice",
        system_prompt="You keep the invoice book: record invoices, pay them once approved, mark them paid, and finish with a short summary.",
        tools=registry,
        resources=(INVOICES, PAYMENTS),
        world=World(model=InvoiceWorld, load=load_world),
    )
