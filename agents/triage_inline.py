"""The triage agent with its read tools run inside ModelTurn (``Agent.inline_read_tools``).

The same agent, tools and world as ``agents.triage``; only where its read calls run differs: a
turn whose calls are all reads (``search_docs``, ``read_document``, ``read_artifact``,
``recall``) records them in ModelTurn's invocation, two state transitions and one Lambda
invocation fewer than CallOneTool's (docs/cost.md). Its transcripts are the triage agent's. Deploy
it under the name ``triage`` (``"agents": {"triage": "agents.triage_inline:build"}``): the stack
then gives it a ModelTurn function of its own, granted its tables' reads and nothing it writes.
"""

from __future__ import annotations

import dataclasses

from agents import triage
from longstep import Agent


def build() -> Agent:
    """The triage agent, its read tools inline."""
    return dataclasses.replace(triage.build(), inline_read_tools=True)
