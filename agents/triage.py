"""The backlog-triage sample agent: it reads docs, files and updates tickets, and emails people.

Each tool declares how it stays safe when a crash makes it run again: the searches are reads,
filing is keyed (the tickets table deduplicates on the idempotency key), updating checks before
it acts, and sending an email can happen at most once and needs a human's approval; its probe
looks in the outbox when a crash leaves its outcome unknown. Each effecting tool lists what it
did in a ledger, from which the local report counts duplicates.
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any, Iterator

from pydantic import BaseModel, Field

from longstep import Agent, Effect, LedgerEntry, ProbeAnswer, ToolContext, ToolInputError, ToolRegistry, Verdict, World, tool

from agents import triage_world as world

# One rule for the final answer, said in the same words by the prompt and by the verifier's
# feedback, and checked by verify_summary: a model that obeys either of them passes.
SUMMARY_RULE = "finish your final answer with a summary of what you did that starts with 'Summary:'"

SYSTEM_PROMPT = (
    "You triage a software team's backlog. Search and read the docs, file a ticket for each new "
    "problem, update existing tickets, and email the owner when something is urgent. When you are "
    f"done, {SUMMARY_RULE} (text before it is fine)."
)

# A summary line: "Summary: ...", in any case, possibly dressed as Markdown ("**Summary:** ...",
# "## Summary:"), its list on the same line or on the lines after it.
_SUMMARY_LINE = re.compile(r"^[\s#>*_-]*summary[*_]*\s*:[*_]*\s*(?P<rest>.*)$", re.IGNORECASE)

registry = ToolRegistry()


class SearchDocsArgs(BaseModel):
    query: str = Field(min_length=1, description="words to look for in titles and summaries")
    limit: int = Field(default=5, ge=1, le=20)


@tool(registry, effect=Effect.READ)
def search_docs(args: SearchDocsArgs, ctx: ToolContext) -> dict[str, Any]:
    """Search the team's documents by title and summary; returns ids, titles and summaries."""
    words = args.query.lower().split()
    hits = []
    for item in world.scan(world.documents(), ProjectionExpression="doc_id, title, summary, part_of"):
        if "part_of" in item:  # a part of a large document's body, not a document
            continue
        text = f"{item['title']['S']} {item.get('summary', {}).get('S', '')}".lower()
        if any(word in text for word in words):
            hits.append({"doc_id": item["doc_id"]["S"], "title": item["title"]["S"], "summary": item.get("summary", {}).get("S", "")})
    hits.sort(key=lambda hit: hit["doc_id"])
    return {"query": args.query, "results": hits[: args.limit]}


class ReadDocumentArgs(BaseModel):
    doc_id: str = Field(min_length=1)


@tool(registry, effect=Effect.READ)
def read_document(args: ReadDocumentArgs, ctx: ToolContext) -> dict[str, Any]:
    """Read a whole document by id."""
    item = world.ddb().get_item(TableName=world.documents(), Key={"doc_id": {"S": args.doc_id}}).get("Item")
    if item is None or "part_of" in item:
        raise ToolInputError(f"doc_id: no document {args.doc_id!r}")
    return {"doc_id": args.doc_id, "title": item["title"]["S"], "body": world.read_body(item)}


class FileTicketArgs(BaseModel):
    title: str = Field(min_length=1, max_length=200)
    body: str = Field(default="", max_length=10_000)
    priority: str = Field(default="P3", pattern=r"^P[0-4]$")


def ticket_id_for(idempotency_key: str) -> str:
    """The tickets system derives the ticket id from the key, so a repeated filing is a no-op."""
    return "TCK-" + uuid.uuid5(uuid.NAMESPACE_URL, idempotency_key).hex[:10].upper()


def tickets_filed(run_id: str) -> Iterator[LedgerEntry]:
    """The ledger of file_ticket: every ticket the run filed, with the key it was filed under."""
    for item in world.scan(world.tickets(), ConsistentRead=True):
        if item.get("run_id", {}).get("S") == run_id:
            yield LedgerEntry(idempotency_key=item["idempotency_key"]["S"], run_id=run_id)


@tool(registry, effect=Effect.KEYED, ledger=tickets_filed)
def file_ticket(args: FileTicketArgs, ctx: ToolContext) -> dict[str, Any]:
    """File a new ticket; returns its id."""
    ticket_id = ticket_id_for(ctx.idempotency_key)
    client = world.ddb()
    try:
        client.put_item(
            TableName=world.tickets(),
            Item={
                "ticket_id": {"S": ticket_id},
                "title": {"S": args.title},
                "body": {"S": args.body},
                "priority": {"S": args.priority},
                "status": {"S": "open"},
                "idempotency_key": {"S": ctx.idempotency_key},
                "run_id": {"S": ctx.run_id},
                "created_at": {"N": str(time.time())},
            },
            ConditionExpression="attribute_not_exists(ticket_id)",
        )
    except client.exceptions.ConditionalCheckFailedException:
        pass  # a repeat of the same key: like any idempotent API, answer as the first call did
    return {"ticket_id": ticket_id, "title": args.title, "priority": args.priority}


class UpdateTicketArgs(BaseModel):
    ticket_id: str = Field(min_length=1)
    status: str = Field(pattern=r"^(open|triaged|in_progress|blocked|closed)$")
    comment: str = Field(default="", max_length=5_000)


def _ticket(ticket_id: str) -> dict[str, Any]:
    item = world.ddb().get_item(TableName=world.tickets(), Key={"ticket_id": {"S": ticket_id}}, ConsistentRead=True).get("Item")
    if item is None:
        raise ToolInputError(f"ticket_id: no ticket {ticket_id!r}")
    return item


def update_already_applied(args: UpdateTicketArgs, ctx: ToolContext) -> dict[str, Any] | None:
    """The check of check_then_act: was this very update (same key) applied before?

    When it was, the answer is the one the update gave, so a replayed run sees the same result.
    """
    item = _ticket(args.ticket_id)
    applied = [entry["S"] for entry in item.get("update_log", {}).get("L", [])]
    if ctx.idempotency_key in applied:
        return {"ticket_id": args.ticket_id, "status": args.status}
    return None


def updates_applied(run_id: str) -> Iterator[LedgerEntry]:
    """The ledger of update_ticket: every update the run applied (one log entry per update)."""
    for item in world.scan(world.tickets(), ConsistentRead=True):
        for entry in item.get("update_log", {}).get("L", []):
            if entry["S"].startswith(f"{run_id}:"):
                yield LedgerEntry(idempotency_key=entry["S"], run_id=run_id)


@tool(registry, effect=Effect.CHECK_THEN_ACT, check=update_already_applied, ledger=updates_applied)
def update_ticket(args: UpdateTicketArgs, ctx: ToolContext) -> dict[str, Any]:
    """Change a ticket's status and add a comment."""
    _ticket(args.ticket_id)
    client = world.ddb()
    try:
        # The write carries its own guard: the SDK sends it again when a response is lost (a read
        # timeout after the update was applied), and list_append would log the update twice.
        # contains() on a list: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.OperatorsAndFunctions.html
        client.update_item(
            TableName=world.tickets(),
            Key={"ticket_id": {"S": args.ticket_id}},
            UpdateExpression="SET #st = :st, last_comment = :c, update_log = list_append(if_not_exists(update_log, :empty), :key)",
            ConditionExpression="attribute_not_exists(update_log) OR NOT contains(update_log, :k)",
            ExpressionAttributeNames={"#st": "status"},
            ExpressionAttributeValues={
                ":st": {"S": args.status},
                ":c": {"S": args.comment},
                ":empty": {"L": []},
                ":key": {"L": [{"S": ctx.idempotency_key}]},
                ":k": {"S": ctx.idempotency_key},
            },
        )
    except client.exceptions.ConditionalCheckFailedException:
        pass  # this call's update is in the log already: applied once
    return {"ticket_id": args.ticket_id, "status": args.status}


class SendEmailArgs(BaseModel):
    to: str = Field(pattern=r"^[^@\s]+@[^@\s]+$", description="an email address, like name@example.com")
    subject: str = Field(min_length=1, max_length=200)
    body: str = Field(min_length=1, max_length=20_000)


def _sent(**filters: str) -> list[dict[str, Any]]:
    """Outbox rows whose attributes equal ``filters`` (a strongly consistent scan: a stale "not
    sent" would make the probe send twice; https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_Scan.html)."""
    names = {f"#a{i}": name for i, name in enumerate(filters)}
    values = {f":v{i}": {"S": value} for i, value in enumerate(filters.values())}
    condition = " AND ".join(f"#a{i} = :v{i}" for i in range(len(filters)))
    return world.scan(
        world.outbox(), ConsistentRead=True, FilterExpression=condition, ExpressionAttributeNames=names, ExpressionAttributeValues=values
    )


def email_in_outbox(args: SendEmailArgs, ctx: ToolContext) -> ProbeAnswer:
    """The probe of send_email: the outbox holds a row for the call's idempotency key, or it does not."""
    rows = _sent(idempotency_key=ctx.idempotency_key)
    if not rows:
        return ProbeAnswer.not_happened()
    return ProbeAnswer.happened_with(sent_result(rows[0]["to"]["S"], rows[0]["subject"]["S"]))


def emails_sent(run_id: str) -> Iterator[LedgerEntry]:
    """The ledger of send_email: one entry per physical send of the run."""
    for row in _sent(run_id=run_id):
        yield LedgerEntry(idempotency_key=row["idempotency_key"]["S"], run_id=run_id)


# What an approver reads on the decision page: the call in a sentence, and what could go wrong.
EMAIL_WORDS = {"summary": 'Send an email to {to} with the subject "{subject}"', "risk": "An email cannot be taken back once it is sent."}


@tool(registry, effect=Effect.AT_MOST_ONCE, requires_approval=True, probe=email_in_outbox, ledger=emails_sent, **EMAIL_WORDS)
def send_email(args: SendEmailArgs, ctx: ToolContext) -> dict[str, Any]:
    """Send an email. A human approves each one before it goes out."""
    message_id = str(uuid.uuid4())  # a physical send: the outbox cannot tell two sends apart
    world.ddb().put_item(
        TableName=world.outbox(),
        Item={
            "message_id": {"S": message_id},
            "idempotency_key": {"S": ctx.idempotency_key},
            "run_id": {"S": ctx.run_id},
            "to": {"S": args.to},
            "subject": {"S": args.subject},
            "body": {"S": args.body},
            "sent_at": {"N": str(time.time())},
        },
    )
    return sent_result(args.to, args.subject)


def sent_result(to: str, subject: str) -> dict[str, Any]:
    """What the model is told after a send (also what the probe answers after a crash)."""
    return {"sent": True, "to": to, "subject": subject}


def verify_summary(answer: str, messages: list[dict[str, Any]]) -> Verdict:
    """Accept a final answer that follows ``SUMMARY_RULE``; otherwise feed the rule back.

    The answer passes when one of its lines starts with ``Summary:`` (any case, Markdown emphasis
    or a heading mark allowed) and something follows it, on that line or below it: text before
    the summary is allowed, as the prompt says. Its last ``Summary:`` line is the one checked.
    """
    lines = answer.strip().splitlines()
    for index in range(len(lines) - 1, -1, -1):
        match = _SUMMARY_LINE.match(lines[index])
        if match is None:
            continue
        if match["rest"].strip() or any(line.strip() for line in lines[index + 1 :]):
            return Verdict(ok=True)
        break
    return Verdict(ok=False, feedback=SUMMARY_RULE)


def ticket_reached_status(args: dict[str, Any]) -> dict[str, Any] | None:
    """A ``wait_for`` condition: the ticket ``args["ticket_id"]`` has status ``args["status"]``.

    The tickets system cannot push a change, so the state machine checks it with backoff.
    """
    ticket_id, wanted = str(args.get("ticket_id", "")), str(args.get("status", ""))
    item = world.ddb().get_item(TableName=world.tickets(), Key={"ticket_id": {"S": ticket_id}}, ConsistentRead=True).get("Item")
    if item is not None and item["status"]["S"] == wanted:
        return {"ticket_id": ticket_id, "status": wanted}
    return None


def build() -> Agent:
    """The triage agent."""
    return Agent(
        name="triage",
        system_prompt=SYSTEM_PROMPT,
        tools=registry,
        verifier=verify_summary,
        conditions={"ticket_status": ticket_reached_status},
        resources=world.RESOURCES,
        world=World(model=world.TriageWorld, load=world.load_world),
    )
