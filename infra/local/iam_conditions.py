"""The Condition element of IAM policies, evaluated as AWS does (the local stack's IAM).

Operators (``StringEquals``, ``ArnLike``, ``Bool``, ``Null``...) compare one request value with
the policy's values: any policy value may match, a negated operator must match none
(https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html).
A key the request does not carry fails a positive operator and satisfies a negated one
(``StringNotLike``, ``ArnNotLike``...); with ``IfExists`` it satisfies either. ARN operators
match each part of the ARN on its own.

Multivalued context keys (``dynamodb:LeadingKeys``: the partition keys a DynamoDB request
touches) take a set operator
(https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-single-vs-multi-valued-context-keys.html):
``ForAllValues:`` holds when every request value matches, and also when the request carries no
value at all (so a policy pairs it with ``Null: false``); ``ForAnyValue:`` holds when at least one
does, and never without values. A multivalued key under a plain operator, or an operator not
listed here, is refused (:class:`UnsupportedCondition`) rather than guessed.
"""

from __future__ import annotations

import fnmatch
from typing import Any, Callable, Union

# A request's condition keys: one value, or the values of a multivalued key.
ContextValue = Union[str, list[str]]


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def like(value: str, pattern: str) -> bool:
    """IAM's wildcards: ``*`` any run of characters, ``?`` one character (case-sensitive)."""
    return fnmatch.fnmatchcase(value, pattern.replace("[", "[[]"))


def arn_like(value: str, pattern: str) -> bool:
    """IAM's ARN operators: each of the six colon-separated parts matched on its own, with
    wildcards (a ``*`` never spans a ``:`` of the first five)."""
    values, patterns = value.split(":", 5), pattern.split(":", 5)
    return len(values) == len(patterns) == 6 and all(like(v, p) for v, p in zip(values, patterns))


# Operators by their positive name; a negated one (``StringNotLike``) holds when the positive test
# fails for every listed value (a NOR).
OPERATORS: dict[str, Callable[[str, str], bool]] = {
    "StringEquals": lambda v, p: v == p,
    "StringEqualsIgnoreCase": lambda v, p: v.lower() == p.lower(),
    "StringLike": like,
    "ArnEquals": arn_like,  # ArnEquals and ArnLike behave the same way
    "ArnLike": arn_like,
    "Bool": lambda v, p: str(v).lower() == str(p).lower(),
}
NEGATED = {
    "StringNotEquals": "StringEquals",
    "StringNotEqualsIgnoreCase": "StringEqualsIgnoreCase",
    "StringNotLike": "StringLike",
    "ArnNotEquals": "ArnEquals",
    "ArnNotLike": "ArnLike",
}
SET_OPERATORS = ("ForAllValues", "ForAnyValue")


class UnsupportedCondition(ValueError):
    """A policy uses a condition the local evaluator does not know (it refuses to guess)."""


def _one_value_holds(name: str, value: str, expected: Any) -> bool:
    """One request value against the policy's values (any matches; a negated operator: none)."""
    matched = any(OPERATORS[NEGATED.get(name, name)](value, str(p)) for p in as_list(expected))
    return not matched if name in NEGATED else matched


def _block_holds(operator: str, block: dict[str, Any], context: dict[str, ContextValue]) -> bool:
    qualifier, _, base = operator.rpartition(":")
    if qualifier and qualifier not in SET_OPERATORS:
        raise UnsupportedCondition(f"condition operator {operator} is not evaluated locally")
    if_exists = base.endswith("IfExists")
    name = base.removesuffix("IfExists")
    if name == "Null":
        if qualifier:
            raise UnsupportedCondition(f"condition operator {operator} is not evaluated locally")
        # Null: true holds when the key is absent (an empty set counts as absent).
        return all((not as_list(context.get(key, []))) == (str(expected).lower() == "true") for key, expected in block.items())
    if NEGATED.get(name, name) not in OPERATORS:
        raise UnsupportedCondition(f"condition operator {operator} is not evaluated locally")
    negated = name in NEGATED
    for key, expected in block.items():
        present = key in context and as_list(context[key]) != []
        if qualifier == "ForAllValues":
            if present and not all(_one_value_holds(name, v, expected) for v in as_list(context[key])):
                return False
            continue  # no values: ForAllValues holds
        if qualifier == "ForAnyValue":
            if not present:
                if if_exists:
                    continue
                return False
            if not any(_one_value_holds(name, v, expected) for v in as_list(context[key])):
                return False
            continue
        if not present:
            # A key the request lacks fails a positive operator and satisfies a negated one
            # ("the condition is true" for StringNotLike or ArnNotLike without the key).
            if if_exists or negated:
                continue
            return False
        if isinstance(context[key], list):
            raise UnsupportedCondition(f"{key} is multivalued: {operator} needs ForAllValues: or ForAnyValue:")
        if not _one_value_holds(name, str(context[key]), expected):
            return False
    return True


def condition_holds(condition: dict[str, Any] | None, context: dict[str, ContextValue]) -> bool:
    """Every operator block of a statement's Condition must hold (AND); within a block, every key.

    Condition key names are case-insensitive, their values case-sensitive (but for
    ``...IgnoreCase`` and ``Bool``).
    """
    lowered = {key.lower(): value for key, value in context.items()}
    return all(_block_holds(operator, {k.lower(): v for k, v in block.items()}, lowered) for operator, block in (condition or {}).items())
