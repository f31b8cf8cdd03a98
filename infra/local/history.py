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
- the final transcript equals the transcript of a serial run of the decisions that won.
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
    """

    effect_keys: list[str] = field(default_factory=list)
    deliveries: list[tuple[str, Any]] = field(default_factory=list)
    decisions: list[tuple[str, str]] = field(default_factory=list)
    messages: list[tuple[int, str]] = field(default_factory=list)
    transcript: str | None = None
    serial_transcript: str | None = None


def check(history: History, observed: Observed) -> list[str]:
    """Every rule the history breaks, one line each (empty: none)."""
    problems = [f"effect {key} happened {n} times" for key, n in Counter(observed.effect_keys).items() if n > 1]
    problems += _signals(history, observed)
    problems += _decisions(history, observed)
    problems += _messages(history, observed)
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
    problems += [f"message {op.value!r} was acknowledged and never taken" for op in sent if op.value not in at]
    for first, second in itertools.permutations(sent, 2):
        if first.client == second.client and first.completed is not None and first.completed < second.invoked:
            if at.get(first.value, -1) > at.get(second.value, len(at)):
                problems.append(f"message {second.value!r} taken before {first.value!r}, sent after it")
    return problems
