"""The research sample: a small research agent, and a lead agent that delegates to it.

``research`` searches a fixed set of notes (a read tool) and answers with what it found. ``lead``
has no tools of its own: it declares ``research`` as a subagent, so its model sees a ``research``
tool (a ``goal`` and optional ``inputs``); each call runs a child run of the research agent, and
the child's final answer comes back as the call's result. Several calls of one turn run in parallel.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from longstep import Agent, Effect, ToolContext, ToolRegistry, tool

NOTES = {
    "payments-timeouts": "The payment provider's p99 latency rose above 8 s during incident 2041; the gateway times out at 30 s.",
    "orders-retries": "The order service retries payment calls three times with no backoff, tripling the load on failures.",
    "checkout-capacity": "Checkout holds a connection per request for the whole payment call; the pool has 200 connections.",
}

registry = ToolRegistry()


class SearchNotesArgs(BaseModel):
    query: str = Field(min_length=1, description="words to look for in the notes")


@tool(registry, effect=Effect.READ)
def search_notes(args: SearchNotesArgs, ctx: ToolContext) -> dict[str, Any]:
    """Search the engineering notes; returns the ids and texts of the notes that mention any of the words."""
    words = args.query.lower().split()
    hits = [{"note_id": key, "text": text} for key, text in sorted(NOTES.items()) if any(w in text.lower() or w in key for w in words)]
    return {"query": args.query, "results": hits}


def build() -> Agent:
    """The research agent: searches the notes and answers with a short finding."""
    return Agent(
        name="research",
        system_prompt="You research one question in the engineering notes and answer with a short, sourced finding.",
        tools=registry,
    )


def build_lead() -> Agent:
    """The lead agent: splits an investigation into questions and delegates each to ``research``."""
    return Agent(
        name="lead",
        system_prompt=(
            "You lead an incident investigation. Split it into independent questions, delegate each to the "
            "research agent (in parallel when you can), then write a short conclusion from their findings."
        ),
        tools=ToolRegistry(),
        subagents=("research",),
    )
