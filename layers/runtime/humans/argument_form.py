"""A tool's arguments as a form an approver edits: fields from the tool's JSON schema, values back
from the posted form, and the schema's refusals as one plain message per field.

Each top-level argument becomes one field, in the order the tool declares them: text (one line,
or several for long text), a number, yes/no, a choice among an enum's values, or a list of
scalars (one item per line). A shape a form cannot show (an object, a list of objects) is edited
as JSON in its own box, the fallback.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from longstep.tools.plain import plain_value

FIELD_PREFIX = "arg."  # the form's name of argument ``to`` is ``arg.to``
LONG_TEXT_FROM_CHARS = 200  # a string whose limit (or value) is longer gets a multi-line box
SCALARS = {"string": "text", "integer": "integer", "number": "number", "boolean": "boolean"}


@dataclass(frozen=True)
class FormField:
    """One argument as a form field.

    Attributes:
        name: the argument's name.
        label: what the approver reads (the schema's title).
        kind: ``text``, ``long_text``, ``integer``, ``number``, ``boolean``, ``choice``, ``list``
            or ``json`` (the fallback).
        required: the tool needs a value.
        nullable: the argument may be left empty (no value).
        options: a choice's values.
        item_kind: a list's item kind (``text``, ``integer``, ``number``, ``boolean``).
        help: the schema's description of the argument.
    """

    name: str
    label: str
    kind: str
    required: bool = False
    nullable: bool = False
    options: tuple[Any, ...] = ()
    item_kind: str = "text"
    help: str = ""


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The schema behind a ``$ref`` or an ``Optional`` (``anyOf`` with null), and whether null is allowed."""
    nullable = False
    if "anyOf" in schema:
        options = [s for s in schema["anyOf"] if s.get("type") != "null"]
        nullable = len(options) < len(schema["anyOf"])
        if len(options) == 1:
            schema = {**schema, **options[0]}
            schema.pop("anyOf", None)
    if "$ref" in schema:
        schema = {**defs.get(schema["$ref"].rsplit("/", 1)[-1], {}), **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema, nullable


def _kind(schema: dict[str, Any], defs: dict[str, Any]) -> tuple[str, tuple[Any, ...], str]:
    if "enum" in schema and all(isinstance(v, (str, int, float)) for v in schema["enum"]):
        return "choice", tuple(schema["enum"]), "text"
    kind = schema.get("type")
    if kind == "string":
        long = int(schema.get("maxLength") or 0) > LONG_TEXT_FROM_CHARS
        return ("long_text" if long else "text"), (), "text"
    if kind in SCALARS:
        return SCALARS[kind], (), "text"
    if kind == "array":
        items, _ = _resolve(schema.get("items") or {}, defs)
        if items.get("type") in SCALARS and "enum" not in items:
            return "list", (), SCALARS[items["type"]]
    return "json", (), "text"


def fields_of(schema: dict[str, Any]) -> list[FormField]:
    """The form of a tool's arguments, in the order the tool declares them (``model_json_schema()``)."""
    defs = schema.get("$defs") or {}
    required = set(schema.get("required") or ())
    out = []
    for name, raw in (schema.get("properties") or {}).items():
        resolved, nullable = _resolve(raw, defs)
        kind, options, item_kind = _kind(resolved, defs)
        # A $ref's own title is its type's (an enum class), not the argument's.
        label = str(raw.get("title") or name.replace("_", " ").capitalize())
        out.append(FormField(name, label, kind, name in required, nullable, options, item_kind, str(resolved.get("description") or "")))
    return out


def with_undeclared(fields: list[FormField], arguments: dict[str, Any]) -> list[FormField]:
    """``fields`` and one for each argument the schema does not name (a tool that takes any, an
    MCP tool's), its kind guessed from the call's value: text, a number, yes/no, a list, else JSON."""
    declared = {f.name for f in fields}
    guessed = []
    for name, value in arguments.items():
        if name in declared:
            continue
        if isinstance(value, bool):
            kind, item = "boolean", "text"
        elif isinstance(value, (int, float)):
            kind, item = ("integer" if isinstance(value, int) else "number"), "text"
        elif isinstance(value, str):
            kind, item = ("long_text" if len(value) > LONG_TEXT_FROM_CHARS else "text"), "text"
        elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            kind, item = "list", "text"
        else:
            kind, item = "json", "text"
        guessed.append(FormField(name, name.replace("_", " ").capitalize(), kind, required=True, item_kind=item))
    return [*fields, *guessed]


def ordered(fields: list[FormField], arguments: dict[str, Any]) -> list[str]:
    """The arguments' names in the tool's order, then any the schema does not name."""
    declared = [f.name for f in fields]
    return [n for n in declared if n in arguments] + [n for n in arguments if n not in declared]


def form_value(field: FormField, value: Any) -> str:
    """The text a field shows for ``value`` (empty for no value)."""
    if value is None:
        return ""
    if field.kind == "boolean":
        return "yes" if value else "no"
    if field.kind == "list" and isinstance(value, list):
        return "\n".join(plain_value(v) for v in value)
    if field.kind == "json":
        return json.dumps(value, indent=2, ensure_ascii=False)
    return str(value)


def _scalar(kind: str, text: str) -> Any:
    """``text`` as a value of ``kind``; ValueError with the plain reason."""
    if kind == "integer":
        try:
            return int(text)
        except ValueError:
            raise ValueError("must be a whole number") from None
    if kind == "number":
        try:
            number = float(text)
        except ValueError:
            raise ValueError("must be a number") from None
        return int(number) if number.is_integer() and "." not in text else number
    if kind == "boolean":
        if text.lower() not in ("yes", "no", "true", "false"):
            raise ValueError("must be yes or no")
        return text.lower() in ("yes", "true")
    return text


def _value(field: FormField, text: str) -> Any:
    if field.kind == "choice":
        for option in field.options:
            if str(option) == text:
                return option
        raise ValueError(f"must be one of: {', '.join(str(o) for o in field.options)}")
    if field.kind == "list":
        items = [line.strip() for line in text.split("\n") if line.strip()]
        values = []
        for n, item in enumerate(items, 1):
            try:
                values.append(_scalar(field.item_kind, item))
            except ValueError as exc:
                raise ValueError(f"line {n} ({item[:40]!r}) {exc}") from None
        return values
    if field.kind == "json":
        try:
            return json.loads(text)
        except ValueError as exc:
            raise ValueError(f"is not valid JSON ({exc.msg}, line {exc.lineno})") from None
    if field.kind in ("text", "long_text"):
        return text
    return _scalar(field.kind, text)


def arguments_from(fields: list[FormField], form: dict[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The arguments a posted form carries, and a plain message for each field it could not read.

    An empty field is no value when the argument may be null, left out when it has a default, and
    the empty string for text (the schema then says whether that will do).
    """
    arguments: dict[str, Any] = {}
    errors: dict[str, str] = {}
    declared = {f.name for f in fields}
    # Arguments the schema does not name (a tool that takes any: an MCP tool's) come as JSON boxes.
    extra = [FormField(k[len(FIELD_PREFIX) :], k[len(FIELD_PREFIX) :], "json") for k in form if k.startswith(FIELD_PREFIX)]
    for field in [*fields, *(f for f in extra if f.name not in declared)]:
        text = form.get(FIELD_PREFIX + field.name, "").replace("\r\n", "\n")
        if not text.strip() and field.kind not in ("text", "long_text"):
            if field.nullable:
                arguments[field.name] = None
            elif field.required:
                errors[field.name] = "is required"
            continue
        if not text and field.nullable:
            arguments[field.name] = None
            continue
        try:
            arguments[field.name] = _value(field, text if field.kind in ("text", "long_text") else text.strip())
        except ValueError as exc:
            errors[field.name] = str(exc)
    return arguments, errors


def _message(error: Any, help_text: str) -> str:
    """One pydantic error in the approver's words (never the pattern's regular expression)."""
    kind, ctx = error["type"], error.get("ctx") or {}
    simple = {
        "missing": "is required",
        "int_parsing": "must be a whole number",
        "int_type": "must be a whole number",
        "int_from_float": "must be a whole number",
        "float_parsing": "must be a number",
        "float_type": "must be a number",
        "bool_parsing": "must be yes or no",
        "bool_type": "must be yes or no",
        "string_type": "must be text",
        "list_type": "must be a list",
        "dict_type": "must be a group of named values (JSON object)",
        "model_type": "must be a group of named values (JSON object)",
        "extra_forbidden": "is not an argument of this tool",
    }
    if kind in simple:
        return simple[kind]
    if kind == "string_too_short":
        return "cannot be empty" if ctx.get("min_length") == 1 else f"must be at least {ctx.get('min_length')} characters"
    if kind == "string_too_long":
        return f"must be at most {ctx.get('max_length')} characters"
    if kind == "string_pattern_mismatch":
        return f"is not in the expected form{f' ({help_text})' if help_text else ''}"
    bounds = {"greater_than_equal": ("ge", "or more"), "less_than_equal": ("le", "or less")}
    if kind in bounds:
        key, words = bounds[kind]
        return f"must be {ctx.get(key)} {words}"
    if kind in ("greater_than", "less_than"):
        return f"must be {'more' if kind == 'greater_than' else 'less'} than {ctx.get('gt', ctx.get('lt'))}"
    if kind in ("literal_error", "enum"):
        return f"must be one of: {ctx.get('expected', '')}".replace("'", "")
    if kind in ("too_short", "too_long"):
        limit = ctx.get("min_length") if kind == "too_short" else ctx.get("max_length")
        return f"must have at {'least' if kind == 'too_short' else 'most'} {limit} item{'' if limit == 1 else 's'}"
    return str(error.get("msg", "is not valid")).split("[", 1)[0].strip()


def plain_errors(exc: ValidationError, fields: list[FormField]) -> dict[str, str]:
    """The schema's refusals, one message per top-level argument (the first found), in the tool's order."""
    helps = {f.name: f.help for f in fields}
    found: dict[str, str] = {}
    for error in exc.errors():
        loc = [str(p) for p in error["loc"]] or ["arguments"]
        name = loc[0]
        if name in found:
            continue
        where = f"item {int(loc[1]) + 1} " if len(loc) > 1 and loc[1].isdigit() else ""
        found[name] = where + _message(error, helps.get(name, ""))
    order = [f.name for f in fields]
    return dict(sorted(found.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order)))
