"""``--fault POINT@N[:RUN]``: a fault may aim at one run of a tree (a parent or a subagent run)."""

from __future__ import annotations

import pytest

from longstep_kit.local.dispatch import Crash
from longstep_kit.local.faults import Fault, FaultInjector, FaultSpecError, parse_fault


def test_a_fault_without_a_run_hits_any_run():
    fault = parse_fault("after_model@1")
    assert fault == Fault("after_model", 1) and fault.run is None
    assert fault.hits("after_model", "lead", 1) and fault.hits("after_model", "lead-t0c1", 1)
    assert not fault.hits("after_model", "lead", 0) and not fault.hits("before_model", "lead", 1)


def test_a_fault_with_a_run_hits_that_run_or_the_child_of_that_tail():
    child = parse_fault("after_effect@0:t0c1")
    assert child == Fault("after_effect", 0, "t0c1")
    assert child.hits("after_effect", "lead-t0c1", 0) and child.hits("after_effect", "t0c1", 0)
    assert not child.hits("after_effect", "lead", 0) and not child.hits("after_effect", "lead-t0c0", 0)
    parent = parse_fault("after_effect@0:lead")
    assert parent.hits("after_effect", "lead", 0) and not parent.hits("after_effect", "lead-t0c1", 0)


@pytest.mark.parametrize("spec", ["after_model@1:", "after_model@x:t0c1", "after_model", "nowhere@1:t0c0"])
def test_malformed_specs_are_refused(spec):
    with pytest.raises(FaultSpecError, match="--fault"):
        parse_fault(spec)


class _Lock:
    """Records the step locks a crash expires."""

    def __init__(self):
        self.expired = []

    def expire(self, key):
        self.expired.append(key)


def test_the_injector_fires_an_aimed_fault_only_in_its_run():
    lock = _Lock()
    injector = FaultInjector(plan=[Fault("before_model", 1, "t0c1")], lock=lambda: lock)
    injector.reach("before_model", "lead-t0c0", 1, None)  # another child: nothing
    assert injector.injected == []
    with pytest.raises(Crash, match="before_model in turn 1"):
        injector.reach("before_model", "lead-t0c1", 1, None)
    assert injector.injected == [{"point": "before_model", "turn": 1, "call": None, "run": "lead-t0c1"}]
    assert len(lock.expired) == 1  # the crashed step's lock, so that its retry can run


def test_a_fired_fault_names_the_run_it_fired_in_when_that_is_another_run():
    from longstep_kit.local.faults import fault_label

    assert fault_label({"point": "after_model", "turn": 1, "run": "delegate-t0c1"}, "delegate") == "after_model@1 in delegate-t0c1"
    assert fault_label({"point": "after_model", "turn": 1, "run": "delegate"}, "delegate") == "after_model@1"
    assert fault_label({"point": "before_tool", "turn": 3}, "delegate") == "before_tool@3"
