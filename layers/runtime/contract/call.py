"""What travels on a tool call: the tool-call Map's item (``CallItem``), with one typed sub-record
for each answer the state machine writes into it (a ResultPath of the definition):

- ``decision``: an approver's decision on the call (RequestApproval, or ApprovalTimedOut);
- ``resolution``: a human's answer to the call's escalation (EscalateCallTool);
- ``signal``: what ended an event wait (WaitForEvent's signal, EventTimedOut, or CallTool's
  SignalTakenError caught);
- ``check``: the last check of a condition wait (CheckCondition, or ConditionCheckFailed);
- ``child``: a delegated call's child outcome (its Finish's output, its failure caught, a refusal,
  or SubagentTimedOut).

Each sub-record reads the answer as the state machine hands it over (unknown fields ignored, every
field optional), so a new field in an answer does not fail a task running older code. The item is
parsed, never written back: the state machine's JSON is the stored format.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from longstep.contract.ids import MAX_CALLS_PER_TURN, RunId, Turn

WaitKind = Literal["none", "timer", "event", "condition", "subagent"]


class _Answer(BaseModel):
    """An answer the state machine wrote into the item: read leniently (see the module)."""

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class Decision(_Answer):
    """An approver's decision (``longstep.humans.decisions.decide``'s body), or ``timeout``.

    Attributes:
        decision: ``approve``, ``reject``, ``edit`` or ``timeout``.
        approver: who decided.
        reason: why (shown to the model on a rejection).
        input: the arguments approved in place of the model's (an edit).
        args_digest: the digest of the arguments decided on (an edit's, else the request's):
            CallTool runs the call only with arguments of this digest.
    """

    decision: str | None = None
    approver: str | None = None
    reason: str | None = None
    input: Any = None
    args_digest: str | None = None

    def event_fields(self) -> dict[str, Any]:
        """What ``approval.decided`` says of the decision (an edit shows the arguments approved)."""
        return {"decision": self.decision, "approver": self.approver, "reason": self.reason, "input": self.input}


class Resolution(_Answer):
    """A human's answer to an escalation (``longstep.humans.escalations.Resolution``, as answered).

    Attributes:
        action: ``retry``, ``skip`` or ``abort``.
        result: the step's result when skipping.
        happened: for an outcome-unknown tool: whether its effect happened.
        resolver: who answered.
    """

    action: str | None = None
    result: Any = None
    happened: bool | None = None
    resolver: str | None = None

    @property
    def retry_without_effect(self) -> bool:
        """A human confirmed that the interrupted at-most-once call did not act: it may run once."""
        return self.action == "retry" and self.happened is False


class Signal(_Answer):
    """What ended an event wait.

    Attributes:
        payload: the signal's payload.
        entry: the signal's queue entry (its sort key), consumed by the call that took it.
        to: the waiter the entry was handed to.
        timed_out: no signal came before the wait's timeout (EventTimedOut).
        error: the error caught when the signal went to another wait (``Error``).
    """

    payload: Any = None
    entry: str | None = None
    to: str | None = None
    timed_out: bool = False
    error: str | None = Field(default=None, alias="Error")


class Check(_Answer):
    """A condition check's answer (CheckCondition's output, or ConditionCheckFailed's).

    Attributes:
        done: the wait is over.
        met: the condition held.
        handover: this execution spent its checks; the wait goes on in a fresh execution.
        waited: seconds waited so far.
        next_wait: seconds until the next check.
        result: what the condition returned when met (a long-running MCP call: its result).
        error: why the condition could not be checked.
        timed_out: the wait's timeout passed first.
        cancelled: the run was stopped (a long-running MCP call's task was cancelled).
        status: a long-running MCP call's task status.
    """

    done: bool = False
    met: bool = False
    handover: bool = False
    waited: int = 0
    next_wait: int = 0
    result: Any = None
    error: str | None = None
    timed_out: bool = False
    cancelled: bool = False
    status: str | None = None


# What of a child's outcome the delegating call returns, in the order its Finish writes them.
CHILD_RESULT_FIELDS = ("run_id", "status", "turns", "output_ref", "output")


class ChildOutcome(_Answer):
    """A delegated call's child outcome: its Finish's output, its failure caught
    (``SubagentFailed``: ``Error`` and ``Cause``), a refusal, or a timeout.

    Attributes:
        run_id, status, turns, output_ref, output: the child's Finish output.
        refused: why the call could start no child.
        timed_out: the child did not finish in time (SubagentTimedOut).
        error, cause: the child run failed (the caught error's ``Error`` and ``Cause``).
    """

    run_id: str | None = None
    status: str | None = None
    turns: int | None = None
    output_ref: Any = None
    output: Any = None
    refused: str | None = None
    timed_out: bool = False
    error: str | None = Field(default=None, alias="Error")
    cause: str | None = Field(default=None, alias="Cause")

    def result(self) -> dict[str, Any]:
        """The child's Finish output the tool returns (the fields it carried, in their order)."""
        given = self.model_fields_set
        return {name: getattr(self, name) for name in CHILD_RESULT_FIELDS if name in given}


class CallItem(BaseModel):
    """One element of the tool-call Map (and CallOneTool's input): which call of which turn to
    run, how the state machine carries it out (``wait`` and its fields, ``approval``), and what
    the state machine's states answered (the typed sub-records).

    Attributes:
        run_id, turn, call: the call.
        tool: the tool's name (checked against the recorded reply).
        approval: an approver decides first (RequestApproval).
        wait: which of ``wait_for``'s waits the state machine carries out first, or a subagent.
        wait_until: a timer's end (ISO 8601).
        event: an event wait's event.
        timeout_seconds: an event or condition wait's timeout.
        condition: a condition wait's condition.
        check_every: a condition wait's first interval.
        subagent: a delegated call's agent.
    """

    model_config = ConfigDict(extra="ignore")

    run_id: RunId
    turn: Turn
    call: int = Field(ge=0, lt=MAX_CALLS_PER_TURN)
    tool: str
    approval: bool = False
    decision: Decision | None = None
    resolution: Resolution | None = None
    wait: WaitKind = "none"
    wait_until: str | None = None
    event: str | None = Field(default=None, max_length=128)
    timeout_seconds: int | None = None
    signal: Signal | None = None
    condition: str | None = Field(default=None, max_length=128)
    check_every: int | None = Field(default=None, ge=1)
    check: Check | None = None
    subagent: str | None = Field(default=None, max_length=64)
    child: ChildOutcome | None = None
