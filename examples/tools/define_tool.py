"""Declare a tool: a function, a pydantic model of its arguments, its effect class, a probe and a ledger."""

from pydantic import BaseModel, Field

from longstep import Effect, LedgerEntry, ProbeAnswer, ToolContext, ToolRegistry, tool

registry = ToolRegistry()
outbox: list[dict] = []  # stands in for a mail service


class SendEmailArgs(BaseModel):
    to: str = Field(pattern=r"^[^@\s]+@[^@\s]+$", description="an email address, like name@example.com")
    subject: str = Field(min_length=1, max_length=200)
    body: str = Field(min_length=1)


def email_in_outbox(args: SendEmailArgs, ctx: ToolContext) -> ProbeAnswer:
    """After a crash: did the email with this call's key go out? Asks the system of record."""
    for sent in outbox:
        if sent["key"] == ctx.idempotency_key:
            return ProbeAnswer.happened_with({"sent": True, "to": sent["to"]})
    return ProbeAnswer.not_happened()


def emails_sent(run_id: str) -> list[LedgerEntry]:
    """Every email sent for the run, one entry per email: a key listed twice is a duplicate."""
    return [LedgerEntry(idempotency_key=sent["key"], run_id=run_id) for sent in outbox if sent["key"].startswith(f"{run_id}:")]


# A sent email cannot be taken back or deduplicated: at most once, and a human approves each.
# summary and risk are what the approver reads: the call in a sentence (a template over the
# arguments), and what could go wrong.
@tool(
    registry,
    effect=Effect.AT_MOST_ONCE,
    requires_approval=True,
    probe=email_in_outbox,
    ledger=emails_sent,
    summary="Send an email to {to}: {subject}",
    risk="An email cannot be taken back once it is sent.",
)
def send_email(args: SendEmailArgs, ctx: ToolContext) -> dict:
    """Send an email."""
    outbox.append({"to": args.to, "subject": args.subject, "body": args.body, "key": ctx.idempotency_key})
    return {"sent": True, "to": args.to}
