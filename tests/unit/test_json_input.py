"""The one parser of outside JSON (``longstep.json_input``): depth counted without recursion,
strings' brackets ignored, a document at the cap accepted and one level more refused, naming the
field, for text and for parsed values alike."""

from __future__ import annotations

import json

import pytest

from longstep.errors import BadRequestError, InvalidInputError
from longstep.json_input import MAX_JSON_DEPTH, check_depth, parse_json, text_depth, value_depth


def wrapped(depth: int) -> object:
    value: object = "leaf"
    for i in range(depth):
        value = {"k": value} if i % 2 else [value, 1]
    return value


@pytest.mark.parametrize("depth", [0, 1, 2, MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, 300])
def test_text_and_value_depth_agree_with_the_structure(depth):
    value = wrapped(depth)
    assert text_depth(json.dumps(value)) == depth
    assert value_depth(value) == depth if depth <= MAX_JSON_DEPTH else value_depth(value) > MAX_JSON_DEPTH


def test_brackets_in_strings_and_escaped_quotes_do_not_count():
    text = json.dumps({"a": "[[[{{{", "b": 'say \\"[[[\\" twice', "c": ["]]]", "\\\\"], "d": "\u005b"})
    assert text_depth(text) == 2
    assert parse_json(text, "body")["a"] == "[[[{{{"


def test_at_the_cap_parses_and_one_more_is_refused_naming_the_field():
    assert parse_json(json.dumps(wrapped(MAX_JSON_DEPTH)), "body") == wrapped(MAX_JSON_DEPTH)
    with pytest.raises(BadRequestError, match=rf"^arguments: nests deeper than {MAX_JSON_DEPTH} levels$") as caught:
        parse_json(json.dumps(wrapped(MAX_JSON_DEPTH + 1)), "arguments")
    assert caught.value.field == "arguments" and isinstance(caught.value, InvalidInputError)


def test_a_deep_document_is_refused_before_python_recurses():
    for text in ("[" * 100_000 + "]" * 100_000, "[" * 100_000, '{"a":' * 50_000 + "1" + "}" * 50_000):
        with pytest.raises(BadRequestError, match="nests deeper"):
            parse_json(text.encode(), "body")
    with pytest.raises(BadRequestError, match=r"^detail: nests deeper"):
        check_depth({"payload": wrapped(100_000)}, "detail")


def test_bad_json_and_bad_bytes_name_the_field():
    with pytest.raises(BadRequestError, match=r"^--input: not valid JSON: Expecting value at line 1 column 1$"):
        parse_json("", "--input")
    with pytest.raises(BadRequestError, match=r"^body: is not UTF-8 text$"):
        parse_json(b"\xff\xfe", "body")
    assert check_depth({"ok": [1, {"two": 2}]}, "detail") == {"ok": [1, {"two": 2}]}
