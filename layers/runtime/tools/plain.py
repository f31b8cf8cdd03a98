"""A tool call in plain words, for the people who approve it.

A tool may declare ``summary``, a sentence about what a call does, written as a template over its
arguments (``"Send an email to {to} about {subject}"``), and ``risk``, what could go wrong in the
approver's words (``"The email cannot be taken back once sent."``). Without them an approver
reads the first line of the tool's description and a sentence about its effect class.
"""

from __future__ import annotations

import json
import string
from typing import Any, Iterable

# What each effect class (``longstep.tools.registry.Effect``) means to someone who is not an engineer.
EFFECT_RISK = {
    "read": "It only reads: nothing is changed.",
    "keyed": "It changes something in another system; if it is ever sent twice, that system ignores the repeat.",
    "check_then_act": "It changes something in another system; it checks first whether the change was already made.",
    "at_most_once": "It changes something that cannot be taken back, so it runs at most once.",
}
UNKNOWN_RISK = "What this call can change is not known: decide as if it cannot be undone."
NOT_GIVEN = "(not given)"


def template_fields(template: str) -> list[str]:
    """The argument names a summary template uses (``{to}``): plain names only.

    Raises:
        ValueError: a malformed template, or a field that is not a plain name (``{to.name}``, ``{0}``).
    """
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ValueError(f"summary {template!r}: {exc}") from None
    names = []
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if not name.isidentifier() or spec or conversion:
            raise ValueError(f"summary {template!r}: {{{name}}} must name an argument, like {{to}}")
        names.append(name)
    return names


def check_summary(tool: str, template: str, arguments: Iterable[str]) -> None:
    """Refuse, at declaration, a summary naming an argument the tool does not have.

    Raises:
        ValueError: naming the tool and the unknown argument.
    """
    known = set(arguments)
    for name in template_fields(template):
        if name not in known:
            raise ValueError(f"tool {tool}: summary names {{{name}}}, which is not one of its arguments ({', '.join(sorted(known))})")


def plain_value(value: Any) -> str:
    """A value as text a person reads: strings as they are, yes/no, lists joined, JSON otherwise."""
    if value is None:
        return NOT_GIVEN
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, list) and all(isinstance(v, (str, int, float, bool)) for v in value):
        return ", ".join(plain_value(v) for v in value) or "(none)"
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def summary_of(template: str, description: str, arguments: Any) -> str:
    """What the call does, in one sentence: the template filled with the arguments, else the first
    line of the tool's description."""
    if not template:
        return (description.strip().splitlines() or [""])[0]
    values = arguments if isinstance(arguments, dict) else {}
    try:
        template_fields(template)
    except ValueError:  # an unchecked template (an MCP tool's) that is malformed: the description instead
        return (description.strip().splitlines() or [""])[0]
    return template.format_map({name: plain_value(values.get(name)) for name in template_fields(template)})


def risk_of(risk: str, effect: str | None) -> str:
    """The risk the tool declares, else what its effect class means in plain words."""
    return risk or EFFECT_RISK.get(effect or "", UNKNOWN_RISK)
