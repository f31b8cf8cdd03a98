"""The run record (``sk = run``): what Init writes once, and what steering, budgets, outputs, MCP
and the condition waits add to it later, read through one typed view.

``RunRecord`` owns the decoding of the stored item (the JSON-encoded fields: the model choice, the
memories, the parent link, the stop request, the MCP catalog, the budget's count), the way
Powertools' ``DataRecord`` owns its own: the tasks read attributes (``run.agent``,
``run.steering.stop_reason``), never keys. The stored format does not change: the record is read
from the item the store hands back (upgraded by ``longstep.contract.migrations``) and
``to_dict()`` gives that item back, so records written by an earlier runtime read the same, and
writers (Init, the steering verbs, ``longstep fork``) keep writing the same attributes.

A ``RunRecord`` is also a read-only ``Mapping`` of the stored item: code outside the runtime that
was written against the plain record (the CLI's and the run UI's views) reads it unchanged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

# The stored attributes (one name each; the modules that write them import these).
AGENT, GOAL, MODEL, MEMORIES, MEMORY_NAMESPACE = "agent", "goal", "model", "memories", "memory_namespace"
MAX_TURNS_FIELD, TURNS_PER_EXECUTION, CREATED_AT = "max_turns", "turns_per_execution", "created_at"
CODE_VERSION, TOOL_EFFECTS = "code_version", "tool_effects"
PARENT, DEADLINE, TENANT, TAGS, BUDGET = "parent", "deadline", "tenant", "tags", "budget"
# An eval run's setting (``longstep.inputs.EvalSpec``, JSON): its tool calls never act (``longstep.evals``).
EVAL = "eval"
# What steering adds (``longstep.steering``).
INBOX_COUNT, INBOX_TAKEN = "inbox_count", "inbox_taken"
PAUSED, PAUSE_TOKEN = "paused", "pause_token"
STOP, INTERRUPT = "stop_requested", "interrupt_requested"
# What budgets add: the tokens of the turns counted so far (``longstep.budget``, JSON).
BUDGET_COUNTED = "budget_counted"
# What the fleet's rate limit adds: the turns whose replies corrected the model's bucket (``longstep.rate_limit``).
RATE_COUNTED = "rate_counted"
# What outputs and snapshots add (``longstep.outputs``, ``longstep.keys``): the run's identity, its
# records' expiry floor, its latest snapshot, and the run a fork shares its first turns with.
IDENTITY, KEPT_UNTIL = "incarnation", "kept_until"
SNAPSHOT_AT, SNAPSHOT_WINDOWS, FORKED_FROM = "snapshot_at", "snapshot_from", "forked_from"
# What MCP adds: the tool catalog the run sees (``longstep.mcp.catalog``, JSON).
MCP_CATALOG = "mcp_catalog"
# What a condition wait adds: the checks of the current execution, and what a handed-over wait
# had waited (``longstep.tasks.check_condition``).
CHECKS_EXECUTION, CHECKS = "condition_checks_execution", "condition_checks"


def _json(raw: Any) -> Any:
    """A JSON-encoded attribute, decoded (None when absent or empty; a value already decoded as is)."""
    if not raw:
        return None
    return json.loads(raw) if isinstance(raw, str) else raw


@dataclass(frozen=True)
class Parent:
    """A child run's link to the call of its parent that waits for it (``longstep.inputs.ParentLink``).

    Attributes:
        run_id: the parent run.
        turn: the parent's turn that delegated.
        call: the call of that turn.
        depth: the child's depth in the tree of runs (its parent's plus one).
    """

    run_id: str
    turn: int
    call: int
    depth: int

    @classmethod
    def of(cls, raw: Any) -> "Parent | None":
        """The link a run record holds (JSON, or a dict), or None."""
        link = _json(raw)
        if not isinstance(link, dict) or not link.get("run_id"):
            return None
        return cls(run_id=str(link["run_id"]), turn=int(link.get("turn") or 0), call=int(link.get("call") or 0), depth=int(link.get("depth") or 1))


@dataclass(frozen=True)
class Steering:
    """What ``longstep send``, ``pause``, ``stop`` and ``interrupt`` asked of the run.

    Attributes:
        inbox_count: messages sent so far.
        inbox_taken: messages the model has been given.
        paused: a pause is asked for, or the run is parked on Pause's token.
        stop_reason: why a stop was asked for (None: no stop).
        interrupted: the current turn's calls not yet run are cancelled.
        pause_token: the Pause task's token, while the run is parked on it.
    """

    inbox_count: int
    inbox_taken: int
    paused: bool
    stop_reason: str | None
    interrupted: bool
    pause_token: str | None = None

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> "Steering":
        """The steering fields of a stored run record."""
        stop = raw.get(STOP)
        if not stop:
            reason = None
        else:  # JSON with the reason; an older record's flag says only that a stop was asked
            reason = str(json.loads(stop).get("reason") or "stopped") if isinstance(stop, str) else "stopped"
        return cls(
            inbox_count=int(raw.get(INBOX_COUNT) or 0),
            inbox_taken=int(raw.get(INBOX_TAKEN) or 0),
            paused=bool(raw.get(PAUSED)),
            stop_reason=reason,
            interrupted=bool(raw.get(INTERRUPT)),
            pause_token=str(raw[PAUSE_TOKEN]) if raw.get(PAUSE_TOKEN) else None,
        )


@dataclass(frozen=True)
class Budgets:
    """A run's budget and what has been counted against it.

    Attributes:
        limits: the start input's budget (``longstep.budget.Budget`` as a dict), or None.
        counted: the tokens of the turns before ``upto`` (``{"upto", "in", "out"}``), or None.
        rate_counted: the turns whose replies corrected the model's rate bucket (None: none yet).
    """

    limits: dict[str, Any] | None
    counted: dict[str, Any] | None
    rate_counted: int | None = None

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> "Budgets":
        """The budget fields of a stored run record."""
        return cls(
            limits=_json(raw.get(BUDGET)),
            counted=_json(raw.get(BUDGET_COUNTED)),
            rate_counted=None if raw.get(RATE_COUNTED) is None else int(raw[RATE_COUNTED]),
        )


@dataclass(frozen=True)
class Outputs:
    """What tells the run's records apart and keeps them: its identity, expiry floor, snapshots.

    Attributes:
        identity: what tells this run from an earlier one of the same id (None: never shared).
        kept_until: no record of the run expires before this (epoch seconds), or None.
        snapshot_at: the turn of the latest context snapshot, or None.
        snapshot_windows: the first turn of each recent snapshot's window, by the snapshot's turn.
        forked_from: the run and turn a fork shares its first turns with (``{"run_id", "at_turn"}``).
    """

    identity: str | None
    kept_until: float | None
    snapshot_at: int | None
    snapshot_windows: dict[int, int]
    forked_from: dict[str, Any] | None

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> "Outputs":
        """The output fields of a stored run record."""
        windows = _json(raw.get(SNAPSHOT_WINDOWS)) or {}
        at, kept, identity = raw.get(SNAPSHOT_AT), raw.get(KEPT_UNTIL), raw.get(IDENTITY)
        return cls(
            identity=None if identity is None else str(identity),
            kept_until=None if kept is None else float(kept),
            snapshot_at=None if at is None else int(at),
            snapshot_windows={int(k): int(v) for k, v in windows.items()},
            forked_from=_json(raw.get(FORKED_FROM)),
        )


class RunRecord(Mapping[str, Any]):
    """The run record, decoded: Init's fields as attributes and typed sub-records for what the
    other writers add (``steering``, ``budgets``, ``outputs``, ``mcp_catalog``).

    Build one with ``from_dict`` from the item a store read; ``to_dict`` gives it back.
    """

    __slots__ = ("_raw",)

    def __init__(self, raw: dict[str, Any]) -> None:
        self._raw = raw

    @classmethod
    def from_dict(cls, item: Mapping[str, Any]) -> "RunRecord":
        """The record of a stored item (as the store read it: upgraded, plain values)."""
        raw = dict(item)
        if isinstance(raw.get(MODEL), str):
            raw[MODEL] = json.loads(raw[MODEL])
        raw[MEMORIES] = _json(raw.get(MEMORIES)) or []
        return cls(raw)

    @classmethod
    def of(cls, run: "RunRecord | Mapping[str, Any]") -> "RunRecord":
        """``run`` as a record: itself, or the record of a plain item (a caller that read one)."""
        return run if isinstance(run, RunRecord) else cls.from_dict(run)

    def to_dict(self) -> dict[str, Any]:
        """The record as a plain dict (the JSON fields decoded, as ``from_dict`` read them)."""
        return dict(self._raw)

    # Mapping: the plain view, for code written against the stored item.
    def __getitem__(self, key: str) -> Any:
        return self._raw[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def __repr__(self) -> str:
        return f"RunRecord(agent={self.agent!r}, goal={self.goal[:40]!r})"

    # Init's fields.
    @property
    def agent(self) -> str:
        """The agent that runs it."""
        return str(self._raw.get(AGENT) or "")

    @property
    def goal(self) -> str:
        """The task, the first user message."""
        return str(self._raw.get(GOAL) or "")

    @property
    def model(self) -> dict[str, Any]:
        """The start input's model choice (``longstep.inputs.ModelChoice`` as a dict)."""
        return dict(self._raw.get(MODEL) or {})

    @property
    def memories(self) -> list[dict[str, str]]:
        """The memories read when the run started (every model call sees the same)."""
        return list(self._raw.get(MEMORIES) or [])

    @property
    def memory_namespace(self) -> str:
        """Where the run's memories are kept (the agent's, per user): the agent's name before it was recorded."""
        return str(self._raw.get(MEMORY_NAMESPACE) or self.agent)

    @property
    def max_turns(self) -> int | None:
        """Stop after this many model turns."""
        value = self._raw.get(MAX_TURNS_FIELD)
        return None if value is None else int(value)

    @property
    def turns_per_execution(self) -> int | None:
        """Hand the run to a fresh execution after this many turns."""
        value = self._raw.get(TURNS_PER_EXECUTION)
        return None if value is None else int(value)

    @property
    def created_at(self) -> float | None:
        """When Init created it (epoch seconds)."""
        value = self._raw.get(CREATED_AT)
        return None if value is None else float(value)

    @property
    def code_version(self) -> str | None:
        """The code version the run started on (``longstep.code_version``)."""
        value = self._raw.get(CODE_VERSION)
        return None if value is None else str(value)

    @property
    def tool_effects(self) -> dict[str, Any] | None:
        """How each tool stayed safe when the run started (``longstep.code_version.tool_effects``)."""
        return _json(self._raw.get(TOOL_EFFECTS))

    @property
    def parent(self) -> Parent | None:
        """A child run's link to its parent's call."""
        return Parent.of(self._raw.get(PARENT))

    @property
    def deadline(self) -> float | None:
        """No model turn starts after this instant (epoch seconds)."""
        value = self._raw.get(DEADLINE)
        return None if value is None else float(value)

    @property
    def tenant(self) -> str | None:
        """Whose work this is."""
        value = self._raw.get(TENANT)
        return None if not value else str(value)

    @property
    def tags(self) -> list[str]:
        """The run's labels."""
        return [str(tag) for tag in _json(self._raw.get(TAGS)) or []]

    @property
    def eval(self) -> dict[str, Any] | None:
        """An eval run's setting (``longstep.inputs.EvalSpec`` as a dict); None for any other run."""
        return _json(self._raw.get(EVAL))

    # What the other writers add.
    @property
    def steering(self) -> Steering:
        """What the steering verbs asked of the run."""
        return Steering.of(self._raw)

    @property
    def budgets(self) -> Budgets:
        """The run's budget and its count."""
        return Budgets.of(self._raw)

    @property
    def outputs(self) -> Outputs:
        """The run's identity, expiry floor and snapshots."""
        return Outputs.of(self._raw)

    @property
    def mcp_catalog(self) -> dict[str, Any]:
        """The MCP tool catalog the run recorded when it started (empty without one)."""
        return _json(self._raw.get(MCP_CATALOG)) or {}

    def condition_checks(self, execution: str) -> int | None:
        """The condition checks counted in ``execution`` (None: that execution has counted none)."""
        if self._raw.get(CHECKS_EXECUTION) != execution:
            return None
        return int(self._raw.get(CHECKS) or 0)

    def condition_waited(self, turn: int, call: int) -> int:
        """What a handed-over condition wait of the call had waited (seconds)."""
        return int(self._raw.get(condition_waited_field(turn, call)) or 0)

    def took_messages(self) -> None:
        """The model step took the inbox (``steering.taken`` removed the interrupt from the stored
        record): a call run later in this invocation is not cancelled by it."""
        self._raw.pop(INTERRUPT, None)

    def held_until(self, kept_until: float) -> None:
        """The expiry floor this invocation renewed the run's records to (``keep_records``): a
        second renewal in the same invocation sees it."""
        self._raw[KEPT_UNTIL] = kept_until


def condition_waited_field(turn: int, call: int) -> str:
    """The run-record field holding what a handed-over condition wait had waited."""
    return f"condition_waited#{turn}#{call}"
