"""What a tool call is: the one place that decides how the state machine carries out a call of a
model turn (ModelTurn writes the decision into the call's item; Dispatch and Route read it).

A call is, in this order of precedence (a later one overrides an earlier one's fields):

1. approved first or not (``approval``: its tool requires an approver);
2. a delegation (``wait = subagent``: a subagent's tool with valid arguments), else a ``wait_for``
   wait (``wait = timer | event | condition``: valid arguments, an event the agent declares), else
   nothing to wait for (``wait = none``);
3. what the tool itself says (``Tool.route``: a long-running MCP call waits as a condition).

A turn whose one call waits for nothing and needs no approver goes straight to CallOneTool
(``single_call``); one whose calls are all inline reads runs them in ModelTurn
(``longstep.tasks.inline_tools``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Mapping

from longstep import clock, subagents
from longstep.agent import Agent
from longstep.contract.run import RunRecord
from longstep.tools.builtins import WAIT_FOR, WaitForArgs


def call_item(
    agent: Agent, run: Mapping[str, Any], run_id: str, turn: int, index: int, use: Mapping[str, Any], reply: Mapping[str, Any]
) -> dict[str, Any]:
    """The item of call ``index`` of ``turn``: which call, and how the state machine carries it out.

    Args:
        agent: the run's agent.
        run: the run record (a tool's own routing may read it).
        run_id, turn, index: the call.
        use: the call's tool use in the model's reply.
        reply: the turn's recorded reply (a timer counts from when the turn began).
    """
    known = agent.tools.tools.get(use["name"])
    if RunRecord.of(run).eval is not None:
        # An eval run asks no person, waits for nothing and starts no child run: CallTool answers
        # every call from the record or withholds it (longstep.evals).
        return {"run_id": run_id, "turn": turn, "call": index, "tool": use["name"], "approval": False, "wait": "none"}
    return {
        "run_id": run_id,
        "turn": turn,
        "call": index,
        "tool": use["name"],
        "approval": bool(known and known.requires_approval),
        **(subagents.routing(agent.subagents, use) or wait_routing(use, reply, agent.events)),
        **(known.route(use, run) if known and known.route else {}),
    }


def single_call(calls: list[dict[str, Any]]) -> bool:
    """Whether the turn's calls are one that waits for nothing and needs no approver (CallOneTool)."""
    return len(calls) == 1 and not calls[0]["approval"] and calls[0].get("wait") == "none"


def wait_routing(use: Mapping[str, Any], record: Mapping[str, Any], events: tuple[str, ...] | None = None) -> dict[str, Any]:
    """How the state machine carries out a ``wait_for`` call: a Wait state or a task token.

    Invalid arguments get no routing, nor does an event the agent does not declare (``events``):
    CallTool then tells the model why.
    """
    if use["name"] != WAIT_FOR:
        return {"wait": "none"}
    try:
        args = WaitForArgs.model_validate(use["input"])
    except ValueError:
        return {"wait": "none"}
    if args.event is not None and events is not None and args.event not in events:
        return {"wait": "none"}  # no signal could reach it: ``signals.send`` refuses them
    if args.event is not None:
        return {"wait": "event", "event": args.event, "timeout_seconds": args.timeout_seconds}
    if args.condition is not None:
        return {"wait": "condition", "condition": args.condition, "timeout_seconds": args.timeout_seconds, "check_every": args.check_every_seconds}
    # Relative to when the turn began as recorded with its reply, so a replay waits for the same
    # instant: the state machine's clock when it entered the turn (``began_at``), which no
    # handler's skew moves; a reply recorded without it, when the handler recorded it.
    began = record.get("began_at", record.get("at", clock.now()))
    return {"wait": "timer", "wait_until": args.timer_until(dt.datetime.fromtimestamp(began, dt.timezone.utc))}
