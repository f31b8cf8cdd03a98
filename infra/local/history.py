"""A history checker in the spirit of Jepsen: concurrent clients act on one run, every operation's
invocation and completion is recorded, and the whole history is checked against the rules.

Clients record what they did (:class:`History`: ``start``, ``signal``, ``decide``, ``steer``,
``stop``, each invoked and then completed ``ok`` or ``refused``, on a logical clock shared by
all threads). After the run, what the world saw is gathered (:class:`Observed`: the effects from
the agents' own ledgers, the signals as delivered, the decisions as applied, the transcript), and
:func:`check` lists every rule broken:

- each effect at most once per idempotency key;
- each acknowledged signal delivered at most once, and signals for one event delivered in the
  order they were sent (one sent after another's send completed comes after it);
- each approval decided once, and that decision is one some client was told succeeded; no two
  clients were both told theirs succeeded;
- each acknowledged steering message taken by one model turn, and a client's messages taken in
  the order it sent them;
- the final transcript equals the transcript of a serial run of the decisions that won;
- after a stop was acknowledged: no call acts (takes a signal, makes an effect) and no model
  turn is taken in an invocation that started after it (``Observed.acted``: the tick, on the
  history's clock, at which the acting invocation started), and the run ends stopped
  (``ABORTED`` or ``STOPPED``) unless its last turn had begun before; an acknowledged message
  may then be left untaken (no model turn came to take it).
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

OK, REFUSED = "ok", "refused"


@dataclass
class Op:
    """One client operation: what, on which key (an approval id, an event), with what value."""

    client: str
    kind: str
    key: str
    value: Any = None
    invoked: int = 0
    completed: int | None = None
    outcome: str | None = None
    answer: Any = None


@dataclass
class History:
    """Operations of concurrent clients, each stamped on one logical clock when invoked and done."""

    ops: list[Op] = field(default_factory=list)
    _ticks: Any = field(default_factory=itertools.count)
    _guard: threading.Lock = field(default_factory=threading.Lock)

    def tick(self) -> int:
        """A moment on the history's clock, for what the world is seen doing (an invocation starting)."""
        with self._guard:
            return next(self._ticks)

    def call(self, client: str, kind: str, key: str, value: Any, fn: Callable[[], Any], refused: tuple[type[BaseException], ...] = ()) -> Op:
        """Invoke ``fn`` as ``client``'s ``kind`` operation and record its outcome.

        An exception in ``refused`` is the operation's ``refused`` outcome (the system said no);
        any other exception propagates (the history cannot tell what it did).
        """
        with self._guard:
            op = Op(client, kind, key, value, invoked=next(self._ticks))
            self.ops.append(op)
        try:
            answer, outcome = fn(), OK
        except refused as exc:
            answer, outcome = f"{type(exc).__name__}: {exc}", REFUSED
        with self._guard:
            op.completed, op.outcome, op.answer = next(self._ticks), outcome, answer
        return op


@dataclass
class Observed:
    """What the world shows after the run.

    Attributes:
        effect_keys: one idempotency key per physical effect, from the agents' ledgers.
        deliveries: (event, value) per signal delivered to a wait, in delivery order.
        decisions: (approval id, decision) per decision applied to a request.
        messages: (turn, text) per steering message a model turn took, in turn order.
        transcript: the run's transcript hash; ``serial_transcript``: a serial run's.
        acted: (tick, what) per call that acted (took a signal, made an effect): the tick at
            which the invocation that acted started.
        status: how the run ended (``SUCCEEDED``, ``STOPPED``, ``ABORTED``...), when known;
            ``ended_tick``: the tick at which the invocation that ended it started (its last
            model turn's: one started after a stop must see it).
    """

    effect_keys: list[str] = field(default_factory=list)
    deliveries: list[tuple[str, Any]] = field(default_factory=list)
    decisions: list[tuple[str, str]] = field(default_factory=list)
    messages: list[tuple[int, str]] = field(default_factory=list)
    transcript: str | None = None
    serial_transcript: str | None = None
    acted: list[tuple[int, str]] = field(default_factory=list)
    status: str | None = None
    ended_tick: int | None = None


STOPPED_STATUSES = ("ABORTED", "STOPPED")


def check(history: History, observed: Observed) -> list[str]:
    """Every rule the history breaks, one line each (empty: none)."""
    problems = [f"effect {key} happened {n} times" for key, n in Counter(observed.effect_keys).items() if n > 1]
    problems += _signals(history, observed)
    problems += _decisions(history, observed)
    problems += _messages(history, observed)
    problems += _stops(history, observed)
    if observed.transcript != observed.serial_transcript:
        problems.append(f"transcript {str(observed.transcript)[:12]} differs from the serial run's {str(observed.serial_transcript)[:12]}")
    return problems


def _key(value: Any) -> str:
    import json

    return json.dumps(value, sort_keys=True)


def _signals(history: History, observed: Observed) -> list[str]:
    problems = []
    delivered = Counter((event, _key(value)) for event, value in observed.deliveries)
    problems += [f"signal {event} {value} delivered {n} times" for (event, value), n in delivered.items() if n > 1]
    position = {(event, _key(value)): i for i, (event, value) in enumerate(observed.deliveries)}
    sent = [op for op in history.ops if op.kind == "signal" and op.outcome == OK]
    for first, second in itertools.permutations(sent, 2):
        if first.key != second.key or first.completed is None or first.completed >= second.invoked:
            continue  # concurrent sends (or other events): either order is right
        a, b = position.get((first.key, _key(first.value))), position.get((second.key, _key(second.value)))
        if a is not None and b is not None and a > b:
            problems.append(f"signal {first.key} {_key(second.value)} delivered before {_key(first.value)}, sent after it")
    return problems


def _decisions(history: History, observed: Observed) -> list[str]:
    problems = []
    applied: dict[str, list[str]] = {}
    for approval, decision in observed.decisions:
        applied.setdefault(approval, []).append(decision)
    problems += [f"approval {a} decided {len(d)} times: {', '.join(d)}" for a, d in applied.items() if len(d) > 1]
    told: dict[str, list[Op]] = {}
    for op in history.ops:
        if op.kind == "decide" and op.outcome == OK:
            told.setdefault(op.key, []).append(op)
    for approval, ops in told.items():
        if len(ops) > 1:
            problems.append(f"approval {approval}: {len(ops)} clients were told their decision won ({', '.join(o.client for o in ops)})")
        winners = applied.get(approval, [])
        if winners and winners[0] not in {o.value for o in ops}:
            problems.append(f"approval {approval}: {winners[0]} applied, but the client told it won said {ops[0].value}")
    return problems


def _messages(history: History, observed: Observed) -> list[str]:
    taken = Counter(text for _, text in observed.messages)
    problems = [f"message {text!r} taken {n} times" for text, n in taken.items() if n > 1]
    at = {text: i for i, (_, text) in enumerate(observed.messages)}
    sent = [op for op in history.ops if op.kind == "steer" and op.outcome == OK]
    if not _stop(history):  # a stop may come before any model turn takes them
        problems += [f"message {op.value!r} was acknowledged and never taken" for op in sent if op.value not in at]
    for first, second in itertools.permutations(sent, 2):
        if first.client == second.client and first.completed is not None and first.completed < second.invoked:
            if at.get(first.value, -1) > at.get(second.value, len(at)):
                problems.append(f"message {second.value!r} taken before {first.value!r}, sent after it")
    return problems


def _stop(history: History) -> Op | None:
    """The first stop a client was told succeeded (the earliest completed)."""
    stops = [op for op in history.ops if op.kind == "stop" and op.outcome == OK and op.completed is not None]
    return min(stops, key=lambda op: op.completed or 0, default=None)


def _stops(history: History, observed: Observed) -> list[str]:
    stop = _stop(history)
    if stop is None:
        return []
    problems = [
        f"{what} acted in an invocation started at {tick}, after the stop was acknowledged at {stop.completed}"
        for tick, what in observed.acted
        if tick > (stop.completed or 0)
    ]
    after = observed.ended_tick is None or observed.ended_tick > (stop.completed or 0)
    if observed.status is not None and observed.status not in STOPPED_STATUSES and after:
        problems.append(f"the run ended {observed.status} though {stop.client}'s stop was acknowledged")
    return problems


class InvocationTicks:
    """A local dispatcher hook (``before_invoke``): the tick at which each model turn and tool call
    of ``run_id`` was first invoked, so the calls that acted can be placed against the clients' ops.
    """

    def __init__(self, history: History, run_id: str) -> None:
        self.history, self.run_id = history, run_id
        self.calls: dict[tuple[int, int], int] = {}
        self.turns: dict[int, int] = {}
        self.last_turn: int | None = None  # the tick of the last model turn invocation

    def __call__(self, invocation: Any) -> None:
        event = invocation.event if isinstance(invocation.event, dict) else {}
        event = event.get("cursor") if isinstance(event.get("cursor"), dict) else event
        if event.get("run_id") != self.run_id:
            return
        if invocation.task == "call_tool" and "call" in event:
            self.calls.setdefault((int(event["turn"]), int(event["call"])), self.history.tick())
        elif invocation.task == "model_turn" and "next_turn" in event:
            tick = self.history.tick()
            self.turns.setdefault(int(event["next_turn"]), tick)
            self.last_turn = tick

    def acted(self, steps: list[Any]) -> list[tuple[int, str]]:
        """(tick, what) per recorded step that acted: a model turn taken, a tool call that succeeded
        (took its signal, made its effect; a cancelled or rejected call did not)."""
        out = []
        for step in steps:
            parts = step.sk.split("#")
            turn = int(parts[1])
            if step.kind == "model" and turn in self.turns:
                out.append((self.turns[turn], f"turn {turn}"))
            elif step.kind == "tool" and (step.result or {}).get("status") == "success" and (turn, int(parts[3])) in self.calls:
                out.append((self.calls[(turn, int(parts[3]))], f"call {turn}:{int(parts[3])}"))
        return out
