# ruff: noqa: F811 - the fixtures of test_approval_api.py are imported and requested by name
"""JSON nested deeper than the cap (longstep.json_input.MAX_JSON_DEPTH) is refused as bad input
naming its field at every entry point of the approval function: the API's bodies (decisions and
signals), the decision page's edited arguments, and EventBridge signal events. Nothing is decided
or recorded, and nothing raises out of the handler (Python's parser recursed: RecursionError, a
502 with a traceback)."""

from __future__ import annotations

import importlib
import json

import pytest

from longstep.errors import InvalidInputError
from longstep.humans.table import PENDING, ApprovalTable
from longstep.json_input import MAX_JSON_DEPTH

from tests.functional.conftest import FakeContext, load_event, scan
from tests.functional.test_approval_api import RUN, api, pending, sfn  # noqa: F401 - fixtures
from tests.functional.test_approval_pages import hidden, link_for, page, ring  # noqa: F401 - fixtures


def nested(depth: int, leaf: str = "1") -> str:
    """JSON text: ``depth`` arrays, one inside the other, around ``leaf``."""
    return "[" * depth + leaf + "]" * depth


def nested_value(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = {"a": value}
    return value


def test_a_5000_deep_decision_body_is_400_naming_the_body_and_decides_nothing(aws, api, pending, sfn):
    status, body = api("decide", approval_id=pending, raw_body=nested(5000))
    assert (status, body["error"], body["field"]) == (400, "bad_request", "body")
    assert f"deeper than {MAX_JSON_DEPTH} levels" in body["message"]
    assert ApprovalTable("approvals", aws["ddb"]).get(pending)["status"] == PENDING and sfn.sent == []


def test_a_body_at_the_cap_still_parses_and_one_level_more_does_not(aws, api, pending):
    deep_input = json.dumps({"decision": "edit", "input": nested_value(MAX_JSON_DEPTH - 1)})  # the body object is level 1
    status, body = api("decide", approval_id=pending, raw_body=deep_input)
    assert status == 400 and body["field"] != "body"  # parsed; the edit fails the tool's schema instead
    too_deep = json.dumps({"decision": "edit", "input": nested_value(MAX_JSON_DEPTH)})
    status, body = api("decide", approval_id=pending, raw_body=too_deep)
    assert (status, body["field"]) == (400, "body")


def test_brackets_inside_strings_are_text_not_depth(aws, api, pending, sfn):
    reason = "[" * 900 + "{" * 900 + '\\"['  # an escaped quote does not end the string
    status, body = api("decide", approval_id=pending, raw_body=json.dumps({"decision": "reject", "reason": reason}))
    assert status == 200, body
    assert ApprovalTable("approvals", aws["ddb"]).get(pending)["status"] == "rejected"


def test_a_5000_deep_signal_body_is_400_and_buffers_nothing(aws, api):
    status, body = api("signal", raw_body=nested(5000, '{"x": 1}'))
    assert (status, body["field"]) == (400, "body")
    assert [i for i in scan(aws["ddb"], "checkpoints") if i["sk"]["S"].startswith("signal#")] == []


def test_a_1500_deep_edit_on_the_decision_page_is_400_naming_the_arguments(aws, ring, sfn, pending):
    link = link_for(ring, pending)
    _, body, _ = page("GET", "decide", link)
    deep = "{" + '"a":{' * 1500 + "}" * 1500 + "}"
    status, text, _ = page("POST", "decide", link, {**hidden(body), "name": "Alice", "action": "edit", "arguments": deep})
    assert status == 400 and "arguments" in text and "Nothing was decided" in text
    assert ApprovalTable("approvals", aws["ddb"]).get(pending)["status"] == PENDING and sfn.sent == []


def test_a_deep_eventbridge_signal_is_invalid_input_naming_the_detail(aws):
    signal_handler = importlib.import_module("longstep_functions.approval_api").signal_handler
    event = load_event("signal_event")
    event["detail"]["payload"] = nested_value(5000)
    with pytest.raises(InvalidInputError, match=r"^detail: nests deeper than"):
        signal_handler(event, FakeContext())
    assert [i for i in scan(aws["ddb"], "checkpoints") if i["sk"]["S"].startswith("signal#") and i["pk"]["S"] == RUN] == []
