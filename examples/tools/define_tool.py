"""Declare a tool: a function, a pydantic model of its arguments, and its effect class."""

from pydantic import BaseModel, Field

from longstep.tools.registry import Effect, ToolContext, ToolRegistry, tool

registry = ToolRegistry()
outbox: list[dict] = []  # stands in for a mail service


class SendEmailArgs(BaseModel):
    to: str = Field(pattern=r"^[^@\s]+@[^@\s]+$")
    subject: str = Field(min_length=1, max_length=200)
    body: str = Field(min_length=1)


# A sent email cannot be taken back or deduplicated: at most once, and a human approves each.
@tool(registry, effect=Effect.AT_MOST_ONCE, requires_approval=True)
def send_email(args: SendEmailArgs, ctx: ToolContext) -> dict:
    """Send an email."""
    outbox.append({"to": args.to, "subject": args.subject, "body": args.body, "key": ctx.idempotency_key})
    return {"sent": True, "to": args.to}
