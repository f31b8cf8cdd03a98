"""An agent whose tools come from an MCP server: the parts depot of ``server.py``.

Each tool says how it stays safe when a crash makes it run again: a lookup is a read; a
reservation is keyed (the depot deduplicates on the idempotency key the call carries in ``_meta``);
shipping happens at most once, after a human approves, and when a crash leaves its outcome
unknown the probe asks the depot whether a shipment with the call's reference exists; the stock
report is long-running (the depot answers with a task the run waits for without compute). The
ledgers read the depot's own books.

The depot runs in this process for the example (``url`` is a function: it is started on first
use); a deployed agent gives its server's URL as a string.
"""

from __future__ import annotations

import threading
from typing import Iterator

from pydantic import BaseModel, Field

from longstep import Agent, Effect, LedgerEntry, McpServer, McpTool, ProbeAnswer, Secret, ToolContext, ToolRegistry, World, clients

from examples.mcp_agent.server import DepotProcess

_lock = threading.Lock()
_process: DepotProcess | None = None


def depot() -> DepotProcess:
    """The example's depot, started on first use on 127.0.0.1."""
    global _process
    with _lock:
        if _process is None:
            _process = DepotProcess().start()
        return _process


def _ledger(tool: str):
    def ledger(run_id: str) -> Iterator[LedgerEntry]:
        for entry in depot().depot.effects(tool, run_id):
            yield LedgerEntry(idempotency_key=entry["key"], run_id=run_id)

    return ledger


def shipped(args, ctx: ToolContext) -> ProbeAnswer:
    """The probe of ship_order: does the depot list a shipment with this call's reference?"""
    found = DEPOT.call("find_shipment", {"reference": ctx.idempotency_key})
    if not found["found"]:
        return ProbeAnswer.not_happened()
    return ProbeAnswer.happened_with(found["shipment"])  # what ship_order returned


# The depot's bearer token, in Secrets Manager: the agent's tool functions (and Init, which lists
# the depot's tools) may read it; it goes in each request's Authorization header.
TOKEN = Secret("depot_token", secret_id="longstep/examples/depot-token")

DEPOT = McpServer(
    "depot",
    url=lambda: depot().url,
    secret=TOKEN,
    tools={
        "lookup_part": McpTool(effect=Effect.READ),
        "reserve_part": McpTool(effect=Effect.KEYED, ledger=_ledger("reserve_part")),
        "ship_order": McpTool(
            effect=Effect.AT_MOST_ONCE,
            requires_approval=True,
            probe=shipped,
            ledger=_ledger("ship_order"),
            summary="Ship reservation {reservation} to {address}",  # what the approver reads
            risk="A shipment cannot be recalled once it leaves the depot.",
        ),
        "build_report": McpTool(effect=Effect.KEYED, long_running=True, timeout_seconds=7 * 86_400, poll_seconds=60, ledger=_ledger("build_report")),
    },
)


class DepotWorld(BaseModel):
    """What a scenario seeds: the token the depot accepts (and the secret that holds it)."""

    token: str = Field(min_length=8)


def load_world(world: DepotWorld) -> None:
    """The depot accepts the token, and the agent's secret holds it."""
    depot().depot.token = world.token
    sm = clients.client("secretsmanager")
    try:
        sm.put_secret_value(SecretId=TOKEN.secret_id, SecretString=world.token)
    except sm.exceptions.ResourceNotFoundException:
        sm.create_secret(Name=TOKEN.secret_id, SecretString=world.token)


def build() -> Agent:
    """The depot agent."""
    return Agent(
        name="depot",
        system_prompt="You manage parts orders with the depot's tools.",
        tools=DEPOT.register(ToolRegistry()),
        resources=(TOKEN,),
        world=World(model=DepotWorld, load=load_world),
    )


__all__ = ["DEPOT", "build", "depot"]
