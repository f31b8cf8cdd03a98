"""The cursor: the state Step Functions carries between turns (a pointer into the checkpoint log,
never the transcript), and where the Route choice sends a run after a model turn."""

from __future__ import annotations

import enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from longstep.contract.call import Resolution
from longstep.contract.ids import MAX_TURNS, RunId, Turn


class Cursor(BaseModel):
    """The state Step Functions carries between turns: a pointer into the checkpoint log.

    Attributes:
        run_id: the run.
        next_turn: the turn ModelTurn makes (or replays) next.
        resolution: a human's answer to an escalation of the step the cursor re-enters.
        generation: which execution of the run this is (0 = first; continue-as-new adds one).
        generation_start: the first turn of this execution.
        entered_at: when the state machine entered ModelTurn (its ``$$.State.EnteredTime``, ISO
            8601): the clock a turn's timers count from. Set on ModelTurn's input only.
    """

    model_config = ConfigDict(extra="ignore")

    run_id: RunId
    next_turn: Turn
    resolution: Resolution | None = None
    generation: int = Field(default=0, ge=0, le=MAX_TURNS)
    generation_start: Turn = 0
    entered_at: str | None = Field(default=None, max_length=40)

    def next(self, next_turn: int, **fields: Any) -> dict[str, Any]:
        """The cursor a task hands on to its next state: this execution's, at ``next_turn``, with
        no resolution (a human's answer is for the step it re-entered), and ``fields`` added."""
        return {
            "run_id": self.run_id,
            "next_turn": next_turn,
            "resolution": None,
            "generation": self.generation,
            "generation_start": self.generation_start,
            **fields,
        }


class Route(enum.StrEnum):
    """Where the state machine's Route choice sends a run after a model turn (``$.route``).

    A test checks these values against the Choice state of the synthesized definition.
    """

    TOOLS = "tools"  # run the turn's tool calls, then the next turn
    # The turn's one call waits for nothing (no approval, no wait): CallOneTool runs it, no Map and
    # no Dispatch (three state transitions a turn: ModelTurn, Route, CallOneTool; docs/cost.md).
    TOOL = "tool"
    # Every call of the turn ran inside ModelTurn (read tools of an agent that inlines them:
    # longstep.tasks.inline_tools): on to the next ModelTurn, two transitions a turn. The Route
    # choice has this branch only in a definition with such an agent.
    INLINE = "inline"
    CORRECT = "correct"  # the reply was fed back (an empty reply, a rejected answer): ask again
    CONTINUE = "continue"  # hand the run over to a fresh execution (continue-as-new)
    PAUSE = "pause"  # park on the Pause state's task token until resumed (longstep.steering)
    DONE = "done"  # the Choice's default: Finish
