"""Each step's input and output, as the state machine hands them over and reads them back.

A task is ``(runtime, In) -> Out``. It is given the JSON the state machine sends (a Lambda event
and a test's dict go the same way) and parses it first into ``In``: a ``Cursor`` (ModelTurn,
Finish, Pause, ContinueAsNew under ``cursor``), a ``CallItem`` (CallTool, CheckCondition;
RequestApproval, WaitForEvent and DelegateToSubagent under ``item``, beside their task token) or
the start input (Init, ``longstep.inputs.StartInput``). ``Out`` is the ``TypedDict`` below that
its return value is: what the next state reads (``ResultSelector``, ``ResultPath``, a Choice's
variables).
"""

from __future__ import annotations

from typing import Any, TypedDict


class InitOutput(TypedDict):
    """Init's output: the first cursor of this execution."""

    run_id: str
    next_turn: int
    resumed: bool
    resolution: None
    generation: int
    generation_start: int


class TurnOutput(TypedDict, total=False):
    """ModelTurn's output: the cursor on, the turn's call items, and where Route sends the run
    (``call``, ``tool``, ``wait``, ``approval``: the one call CallOneTool runs)."""

    run_id: str
    turn: int
    next_turn: int
    calls: list[dict[str, Any]]
    resolution: None
    generation: int
    generation_start: int
    route: str
    stop: str | None
    replayed: bool
    inline_replayed: int
    call: int
    tool: str
    wait: str
    approval: bool


class CallOutput(TypedDict, total=False):
    """CallTool's output (CallOneTool's adds the next cursor's fields)."""

    run_id: str
    turn: int
    call: int
    tool: str
    status: str
    replayed: bool
    next_turn: int
    resolution: None
    generation: int
    generation_start: int


class CheckOutput(TypedDict, total=False):
    """CheckCondition's output (``longstep.contract.call.Check`` reads it back on the item)."""

    done: bool
    met: bool
    handover: bool
    waited: int
    next_wait: int
    result: Any
    error: str
    timed_out: bool
    cancelled: bool
    status: str


class ParkedOutput(TypedDict, total=False):
    """What a task that parks on a token returns (RequestApproval, WaitForEvent,
    DelegateToSubagent, Escalate, Pause): the state machine waits for the token, not for this."""

    run_id: str
    turn: int
    call: int
    status: str
    event: str | None
    task: str
    child_run_id: str
    approval_id: str


class FinishOutput(TypedDict, total=False):
    """Finish's output: the execution's output (and a parent's delegated call's child outcome)."""

    run_id: str
    status: str
    turns: int
    stop: str
    stop_reason: str
    output: str
    output_ref: str


class ContinueOutput(TypedDict):
    """ContinueAsNew's output."""

    run_id: str
    continued_as: str
    generation: int
    next_turn: int


class ChildFailedOutput(TypedDict):
    """ChildFailed's output: the failing run and the parent it told (None: not a child run)."""

    run_id: str
    parent: str | None


class FleetOutput(TypedDict, total=False):
    """FleetGate's output: a slot taken or given back, or a rate draw's wait."""

    run_id: str
    key: str
    status: str
    released: bool
    woke: list[str]
    wait_seconds: float
    model_id: str
