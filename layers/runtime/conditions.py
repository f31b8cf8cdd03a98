"""What a conditional write requires of the record it writes: one model, evaluated in memory
(``longstep.inmemory``) and written as a DynamoDB condition expression (``longstep.store``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from longstep import codec


@dataclass(frozen=True)
class Condition:
    """What a conditional write requires of the record; every part must hold.

    Attributes:
        exists: True: the record exists; False: it does not; None: either.
        equal: each attribute has this value.
        not_equal: each attribute is absent or has another value.
        below: each attribute is absent or less than this number.
        absent: each attribute is absent (an absent record has none).
        any_of: at least one of these conditions holds (none given: no such part); each one
            requires something.
    """

    exists: bool | None = None
    equal: Mapping[str, Any] = field(default_factory=dict)
    not_equal: Mapping[str, Any] = field(default_factory=dict)
    below: Mapping[str, Any] = field(default_factory=dict)
    absent: tuple[str, ...] = ()
    any_of: tuple["Condition", ...] = ()

    def holds(self, record: Mapping[str, Any] | None) -> bool:
        """Whether a record (plain values; None when absent) satisfies the condition."""
        current = record or {}
        if self.exists is not None and (record is not None) != self.exists:
            return False
        if any(name not in current or current[name] != value for name, value in self.equal.items()):
            return False
        if any(current.get(name) == value for name, value in self.not_equal.items()):
            return False
        if any(name in current for name in self.absent):
            return False
        if self.any_of and not any(c.holds(record) for c in self.any_of):
            return False
        return all(name not in current or current[name] < value for name, value in self.below.items())

    def expression(self, name: Callable[[str], str], value: Callable[[Any], str], pk: str) -> list[str]:
        """The condition's parts as DynamoDB condition expressions (to be joined with AND).

        Args:
            name: binds an attribute name, returning its placeholder (``#a0``).
            value: binds a value, returning its placeholder (``:v0``).
            pk: the placeholder of the partition key (whether the record exists).
        """
        parts = []
        if self.exists is not None:
            parts.append(f"{'attribute_exists' if self.exists else 'attribute_not_exists'}({pk})")
        parts += [f"{name(a)} = {value(v)}" for a, v in self.equal.items()]
        for a, v in self.not_equal.items():
            n = name(a)
            parts.append(f"(attribute_not_exists({n}) OR {n} <> {value(v)})")
        parts += [f"attribute_not_exists({name(a)})" for a in self.absent]
        for a, v in self.below.items():
            n = name(a)
            parts.append(f"(attribute_not_exists({n}) OR {n} < {value(v)})")
        if self.any_of:  # each alternative requires something (DynamoDB has no literal true)
            # DynamoDB refuses redundant parentheses ("The expression has redundant parentheses"):
            # an alternative of one part is already bracketed where it needs to be.
            alternatives = [
                " AND ".join(p) if len(p) == 1 else "(" + " AND ".join(p) + ")" for p in (c.expression(name, value, pk) for c in self.any_of)
            ]
            parts.append("(" + " OR ".join(alternatives) + ")")
        return parts


class Bindings:
    """The placeholders of one DynamoDB request's expressions: ``#a0`` for names, ``:v0`` for values."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.values: dict[str, Any] = {}

    def name(self, attr: str) -> str:
        """Bind an attribute name; its placeholder."""
        placeholder = f"#a{len(self.names)}"
        self.names[placeholder] = attr
        return placeholder

    def value(self, raw: Any) -> str:
        """Bind a plain value (typed with ``longstep.codec``); its placeholder."""
        placeholder = f":v{len(self.values)}"
        self.values[placeholder] = codec.attribute(raw)
        return placeholder
