"""wait_for's arguments: exactly one kind of wait, and when a timer ends."""

import datetime as dt

import pytest
from pydantic import ValidationError

from longstep.tools.builtins import WaitForArgs


@pytest.mark.parametrize(
    "args",
    [{"event": "ci"}, {"seconds": 60}, {"until": "2026-12-01T09:00:00Z"}, {"condition": "ticket_status", "args": {"ticket_id": "B"}}],
)
def test_each_kind_of_wait_is_accepted(args):
    parsed = WaitForArgs.model_validate(args)
    kinds = [k for k in ("event", "seconds", "until", "condition") if getattr(parsed, k) is not None]
    assert kinds == [next(k for k in args if k in ("event", "seconds", "until", "condition"))]


@pytest.mark.parametrize("args", [{}, {"event": "ci", "seconds": 5}, {"condition": "c", "until": "2026-12-01T09:00:00Z"}])
def test_anything_but_exactly_one_kind_is_refused(args):
    with pytest.raises(ValidationError, match="exactly one of event, seconds, until or condition"):
        WaitForArgs.model_validate(args)


def test_until_needs_a_time_zone():
    with pytest.raises(ValidationError, match="time zone"):
        WaitForArgs.model_validate({"until": "2026-12-01T09:00:00"})


def test_a_relative_timer_ends_relative_to_the_recorded_reply():
    recorded = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.timezone.utc)
    assert WaitForArgs(seconds=172_800).timer_until(recorded) == "2026-12-02T12:00:00Z"
    assert WaitForArgs(until="2026-12-25T10:00:00+01:00").timer_until(recorded) == "2026-12-25T09:00:00Z"
