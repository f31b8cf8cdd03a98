"""The tool registry: each tool is a Python function, a pydantic argument model and an effect class."""

from __future__ import annotations

import enum
import inspect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable

from pydantic import BaseModel, ValidationError

from longstep.errors import ToolArgumentsError, UnknownToolError
from longstep.errors import describe_validation_error
from longstep.contract.call import CallItem
from longstep.tools import plain

if TYPE_CHECKING:
    from longstep.artifacts import ArtifactStore
    from longstep.memory import MemoryStore


class Effect(str, enum.Enum):
    """How a tool stays safe when a crash makes it run again (docs/design.md §3)."""

    READ = "read"
    """No external effect: run it again."""
    KEYED = "keyed"
    """The remote system deduplicates on the idempotency key the tool is given."""
    CHECK_THEN_ACT = "check_then_act"
    """The tool supplies a check; when it says the work is done, the write is skipped."""
    AT_MOST_ONCE = "at_most_once"
    """Cannot be deduplicated: never run twice; an interrupted call escalates to a human."""


@dataclass(frozen=True)
class ToolServices:
    """The runtime's services, for the tools every agent has (``longstep.tools.builtins``).

    Attributes:
        artifacts: the artifact store (offloaded outputs).
        memory: the long-term memory table (None when the deployment has none).
        memory_namespace: the run's memory namespace (its agent, and user when it names one).
    """

    artifacts: ArtifactStore
    memory: MemoryStore | None = None
    memory_namespace: str = ""


@dataclass(frozen=True)
class ToolContext:
    """What a tool knows about the call it serves.

    Attributes:
        run_id: the run.
        turn: the model turn that asked for the call.
        call: the call's index within the turn.
        idempotency_key: ``run_id:turn:call``, stable across restarts; keyed tools pass it on.
        services: the runtime's services (None outside a CallTool task, in tests).
        item: the call as the state machine handed it over, with what ended a ``wait_for``'s
            wait (None outside a CallTool task).
    """

    run_id: str
    turn: int
    call: int
    idempotency_key: str
    services: ToolServices | None = None
    item: CallItem | None = None


ToolFn = Callable[[Any, ToolContext], Any]


@dataclass(frozen=True)
class ProbeAnswer:
    """What a probe found out about an interrupted at-most-once call.

    Build it with :meth:`happened_with`, :meth:`not_happened` or :meth:`unknown`.

    Attributes:
        happened: True (the effect is in the system of record), False (it is not, for certain),
            None (the probe cannot tell).
        result: when it happened: the result the tool would have returned.
        reason: when it cannot tell: why, for the human who will decide.
    """

    happened: bool | None
    result: Any = None
    reason: str = ""

    @classmethod
    def happened_with(cls, result: Any) -> "ProbeAnswer":
        """The effect happened; ``result`` is what the tool would have returned."""
        return cls(happened=True, result=result)

    @classmethod
    def not_happened(cls) -> "ProbeAnswer":
        """The effect certainly did not happen: the tool may run."""
        return cls(happened=False)

    @classmethod
    def unknown(cls, reason: str = "") -> "ProbeAnswer":
        """The probe cannot tell: a human decides."""
        return cls(happened=None, reason=reason)


ProbeFn = Callable[[Any, ToolContext], ProbeAnswer]
"""``probe(args, ctx)``: did the effect with ``ctx.idempotency_key`` happen?"""


@dataclass(frozen=True)
class LedgerEntry:
    """One effect a tool made, as its system of record lists it.

    Attributes:
        idempotency_key: the key the tool was given when it acted (``run_id:turn:call``).
        run_id: the run the effect belongs to.
    """

    idempotency_key: str
    run_id: str


LedgerFn = Callable[[str], Iterable[LedgerEntry]]
"""``ledger(run_id)``: every effect the tool made for the run (one entry per physical effect)."""


@dataclass(frozen=True)
class Tool:
    """A tool the model may call.

    Attributes:
        name: the name the model uses.
        description: what the tool does, for the model.
        args_model: pydantic model of the arguments; its JSON schema becomes the toolSpec.
        fn: ``fn(args, ctx)`` performs the call and returns a JSON value.
        effect: the effect class.
        requires_approval: a human decides before the call runs.
        check: for ``check_then_act``: ``check(args, ctx)`` returns the earlier result when the
            work is already done, else None.
        probe: for ``at_most_once``: asked when a crash left an intent without a result, it
            answers from the system of record whether the effect happened (see ``ProbeAnswer``).
        ledger: lists the effects the tool made for a run, so duplicates can be counted.
        route: ``route(use, run)``: fields of the call's Map item beyond the defaults, from the
            tool use and the run record (an MCP tool's approval from its server's hints, a
            long-running MCP call's condition wait: ``longstep.mcp``).
        summary: what a call does, in the approver's words: a template over the arguments
            (``"Send an email to {to}"``); empty: the description's first line.
        risk: what could go wrong, in the approver's words; empty: the effect class in plain words.
    """

    name: str
    description: str
    args_model: type[BaseModel]
    fn: ToolFn
    effect: Effect = Effect.READ
    requires_approval: bool = False
    check: ToolFn | None = None
    probe: ProbeFn | None = None
    ledger: LedgerFn | None = None
    route: Callable[[dict[str, Any], Any], dict[str, Any]] | None = None
    summary: str = ""
    risk: str = ""

    def __post_init__(self) -> None:
        if self.summary and self.args_model.model_config.get("extra") != "allow":
            # A model that takes any argument (an MCP tool's: the server's schema names them) is not checked.
            plain.check_summary(self.name, self.summary, self.args_model.model_fields)
        if self.effect is Effect.CHECK_THEN_ACT and self.check is None:
            raise ValueError(f"tool {self.name}: check_then_act needs a check function")
        if self.probe is not None and self.effect is not Effect.AT_MOST_ONCE:
            # Other effect classes never leave an outcome unknown: a probe there would never be asked.
            raise ValueError(f"tool {self.name}: probe is only for at_most_once tools, not {self.effect.value}")
        if self.ledger is not None and self.effect is Effect.READ:
            raise ValueError(f"tool {self.name}: a read tool makes no effects to list in a ledger")

    def tool_spec(self) -> dict[str, Any]:
        """The Bedrock Converse ``toolSpec`` entry."""
        return {
            "toolSpec": {
                "name": self.name,
                "description": self.description,
                "inputSchema": {"json": self.args_model.model_json_schema()},
            }
        }

    def parse_args(self, raw: Any) -> BaseModel:
        """Validate the model's arguments.

        Raises:
            ToolArgumentsError: naming each bad field, to be told to the model.
        """
        if not isinstance(raw, dict):
            raise ToolArgumentsError(f"arguments of {self.name} must be a JSON object")
        try:
            return self.args_model.model_validate(raw)
        except ValidationError as exc:
            raise ToolArgumentsError(f"arguments of {self.name}: {describe_validation_error(exc)}") from None

    def summary_of(self, arguments: Any) -> str:
        """What a call with ``arguments`` does, in one sentence for the approver."""
        return plain.summary_of(self.summary, self.description, arguments)

    def risk_text(self) -> str:
        """What could go wrong, in the approver's words."""
        return plain.risk_of(self.risk, self.effect.value)


@dataclass
class ToolRegistry:
    """The tools of one agent, by name."""

    tools: dict[str, Tool] = field(default_factory=dict)
    # Every model call sends the specs; building JSON schemas each time would cost every turn.
    _specs: list[dict[str, Any]] | None = field(default=None, init=False, repr=False, compare=False)

    def register(self, item: Tool) -> Tool:
        """Add a tool; names must be unique."""
        self._specs = None
        if item.name in self.tools:
            raise ValueError(f"tool {item.name} is registered twice")
        self.tools[item.name] = item
        return item

    def get(self, name: str) -> Tool:
        """The tool called ``name``.

        Raises:
            UnknownToolError: no such tool, with the list of tools that exist.
        """
        try:
            return self.tools[name]
        except KeyError:
            raise UnknownToolError(f"unknown tool {name!r}; available: {', '.join(sorted(self.tools))}") from None

    def specs(self) -> list[dict[str, Any]]:
        """Every tool's toolSpec, in name order."""
        if self._specs is None:
            self._specs = [self.tools[name].tool_spec() for name in sorted(self.tools)]
        return self._specs


def tool(
    registry: ToolRegistry,
    *,
    effect: Effect = Effect.READ,
    requires_approval: bool = False,
    check: ToolFn | None = None,
    probe: ProbeFn | None = None,
    ledger: LedgerFn | None = None,
    name: str | None = None,
    summary: str = "",
    risk: str = "",
) -> Callable[[ToolFn], ToolFn]:
    """Register ``fn(args: ArgsModel, ctx: ToolContext)`` as a tool; the docstring is its description.

    The argument model is read from the annotation of the function's first parameter. ``check``,
    ``probe`` and ``ledger`` are described on :class:`Tool`. ``summary`` and ``risk`` are what an
    approver reads: ``summary`` a sentence about the call, a template over its arguments
    (``"Send an email to {to}"``, checked against the argument model when the tool is declared),
    ``risk`` what could go wrong (``"The email cannot be taken back once sent."``).
    """

    def decorate(fn: ToolFn) -> ToolFn:
        params = list(inspect.signature(fn, eval_str=True).parameters.values())
        args_model = params[0].annotation if params else None
        if not (inspect.isclass(args_model) and issubclass(args_model, BaseModel)):
            raise TypeError(f"tool {fn.__name__}: first parameter must be annotated with a pydantic model")
        registry.register(
            Tool(
                name=name or fn.__name__,
                description=inspect.cleandoc(fn.__doc__ or fn.__name__),
                args_model=args_model,
                fn=fn,
                effect=effect,
                requires_approval=requires_approval,
                check=check,
                probe=probe,
                ledger=ledger,
                summary=summary,
                risk=risk,
            )
        )
        return fn

    return decorate
