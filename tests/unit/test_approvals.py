"""The approver's Decision model."""

import pytest
from pydantic import ValidationError

from longstep.approvals import Decision
from longstep.errors import InvalidInputError
from longstep.inputs import parse_model


def test_approve_needs_nothing_else():
    d = Decision(decision="approve")
    assert d.reason is None and d.input is None
    assert d.approver == "unknown"
    assert d.model_dump(exclude_none=True) == {"decision": "approve", "approver": "unknown"}


@pytest.mark.parametrize("reason", [None, ""])
def test_reject_requires_a_reason(reason):
    with pytest.raises(ValidationError, match="reason is required"):
        Decision(decision="reject", reason=reason)


def test_reject_with_reason_is_valid():
    d = Decision(decision="reject", reason="wrong recipient", approver="alice")
    assert (d.reason, d.approver) == ("wrong recipient", "alice")


def test_edit_requires_input():
    with pytest.raises(ValidationError, match="input is required"):
        Decision(decision="edit", reason="fixing the address")


def test_edit_with_input_is_valid():
    d = Decision(decision="edit", input={"to": "bob@example.com"})
    assert d.input == {"to": "bob@example.com"}


def test_unknown_decision_is_rejected():
    with pytest.raises(ValidationError) as info:
        Decision(decision="maybe")
    assert info.value.errors()[0]["loc"] == ("decision",)


def test_extra_fields_are_forbidden():
    with pytest.raises(ValidationError, match="Extra inputs"):
        Decision(decision="approve", comment="lgtm")


def test_parse_model_turns_decision_problems_into_invalid_input():
    with pytest.raises(InvalidInputError, match="reason is required to reject"):
        parse_model(Decision, {"decision": "reject"}, "decision")
    with pytest.raises(InvalidInputError, match="input"):
        parse_model(Decision, {"decision": "edit", "input": "not an object"}, "decision")
