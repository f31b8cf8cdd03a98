"""The ``KIND.WHAT@N`` fault specs (local/fault_kinds.py): parsed, and refused with one line naming the bad part."""

from __future__ import annotations

import pytest

from longstep_kit.local.faults import Fault, FaultSpecError, parse_fault
from longstep import clock


def test_the_new_kinds_parse():
    assert parse_fault("zombie.after_model@1") == Fault("zombie.after_model", 1)
    assert parse_fault("zombie.before_tool@2:t0c1") == Fault("zombie.before_tool", 2, "t0c1")
    assert parse_fault("lost_ack.SendTaskSuccess@0") == Fault("lost_ack.SendTaskSuccess", 0)
    assert parse_fault("skew.approval_api@-600") == Fault("skew.approval_api", -600)
    assert parse_fault("skew.call_tool@+30") == Fault("skew.call_tool", 30)


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ("zombie.child_started@1", "a zombie stalls at a step point"),
        ("zombie.nowhere@1", "a zombie stalls at a step point"),
        ("lost_ack.GetItem@0", "unknown operation 'GetItem'"),
        ("lost_ack.PutItem@x", "with N a number"),
        ("skew.no_such_task@5", "unknown task 'no_such_task'"),
        ("skew.call_tool@soon", "expected skew.TASK@SECONDS"),
        ("ghost.after_model@1", "unknown fault 'ghost.after_model'"),
    ],
)
def test_a_bad_spec_names_its_bad_part(spec, named):
    with pytest.raises(FaultSpecError) as caught:
        parse_fault(spec)
    assert named in str(caught.value) and "\n" not in str(caught.value)


def test_a_skewed_context_reads_the_clock_off_and_others_do_not():
    with clock.use_source(lambda: 1000.0):
        with clock.skewed(-30):
            assert clock.now() == 970.0
            with clock.skewed(5):
                assert clock.now() == 1005.0
            assert clock.now() == 970.0
        assert clock.now() == 1000.0
