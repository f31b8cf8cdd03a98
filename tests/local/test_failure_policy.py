"""Failure policy by category on the local stack: transient errors retry within budget, permanent
ones escalate at once, model mistakes are corrected within budget, and rejected answers are fed
back within budget; past a budget, a human decides."""

from __future__ import annotations

import itertools
import json
import statistics
import threading
from collections import Counter

import pytest

from longstep_kit.local.faults import Fault
from longstep_kit.local.runner import RunOptions, run_scenario
from longstep_kit.local.scenario import Scenario
from longstep_kit.testing.wait import wait_execution
from longstep import faults
from longstep.errors import ThrottledError
from tests.local.conftest import sent_email_rows

_names = itertools.count()


def _run(stack, triage, **options):
    stack.reset_data()
    return run_scenario(stack, triage, RunOptions(run_id="triage", execution_name=f"policy-{next(_names)}", **options))


@pytest.fixture(scope="module")
def clean(stack, triage):
    return _run(stack, triage)


def _failures_per_step(stack, report_first: int) -> Counter:
    per_step: Counter = Counter()
    for inv in stack.dispatcher.invocations[report_first:]:
        if inv.error and inv.task.startswith(("model_turn", "call_tool")):
            ev = inv.event
            per_step[(inv.handler, ev.get("next_turn", ev.get("turn")), ev.get("call"))] += 1
    return per_step


def _max_attempts(stack, state: str) -> int:
    definition = json.loads(stack.client("stepfunctions").describe_state_machine(stateMachineArn=stack.state_machine_arn)["definition"])
    states = {**definition["States"], **definition["States"]["ToolCalls"]["ItemProcessor"]["States"]}
    (transient,) = [r for r in states[state]["Retry"] if "ThrottledError" in r["ErrorEquals"]]
    return transient["MaxAttempts"]


def test_thirty_percent_throttling_gives_the_clean_transcript_within_budget(stack, triage, clean):
    first = len(stack.dispatcher.invocations)
    report = _run(stack, triage, throttle=0.3, seed=3)
    assert report["status"] == "SUCCEEDED"
    assert report["transcript_sha256"] == clean["transcript_sha256"]
    assert report["effects"] == clean["effects"]
    assert report["attempts"]["transient"] >= 4  # about 30% of 19 steps' first attempts
    assert report["attempts"]["permanent"] == 0 and report["escalations"] == []
    budget = min(_max_attempts(stack, "ModelTurn"), _max_attempts(stack, "CallTool"))
    assert max(_failures_per_step(stack, first).values()) < budget


def test_a_permanent_error_is_attempted_once_then_escalates(stack, triage, clean):
    first = len(stack.dispatcher.invocations)
    report = _run(stack, triage, faults=[Fault("permanent", 2)])
    failed = [i for i in stack.dispatcher.invocations[first:] if i.error and i.task.startswith("model_turn")]
    assert [(i.error["errorType"], i.event["next_turn"]) for i in failed] == [("ModelAccessError", 2)]
    (escalation,) = report["escalations"]
    assert (escalation["turn"], escalation["task"], escalation["error"]) == (2, "ModelTurn", "ModelAccessError")
    assert escalation["resolution"]["action"] == "retry"  # --approve auto: a human looked and retried
    assert report["status"] == "SUCCEEDED" and report["transcript_sha256"] == clean["transcript_sha256"]


def test_a_bad_tool_call_is_corrected_within_budget(stack, triage, clean):
    report = _run(stack, triage, faults=[Fault("bad_tool_call", 3)])
    assert report["status"] == "SUCCEEDED" and report["output"] == clean["output"]
    assert report["attempts"]["model"] == 1 and report["escalations"] == []
    assert report["turns"] == clean["turns"] + 1
    assert report["effects"] == clean["effects"]
    # The injected turn shifts the script by one (script turn 7 plays in run turn 8): the scripted
    # edit still reaches the call it was written for, and the edited email is the one sent.
    (edited,) = [a for a in report["approvals"] if a["status"] == "edited"]
    assert (edited["turn"], edited["call"]) == (8, 0)
    # What went out is the approver's edit, word for word (to, subject and body), and not the original.
    edit = triage.approvals["7:0"].input
    sent = sent_email_rows(stack, report["run_id"])
    assert edit in sent
    assert [row for row in sent if row["to"] == edit["to"]] == [edit]
    original = triage.turns[7].tool_calls[0].input
    assert original not in sent and all(row["body"] != original["body"] for row in sent)


def test_bad_tool_calls_past_the_budget_escalate(stack, triage, clean):
    report = _run(stack, triage, faults=[Fault("bad_tool_call", t) for t in (3, 4, 5)])
    (escalation,) = report["escalations"]
    assert (escalation["turn"], escalation["error"]) == (6, "CorrectionBudgetError")
    assert report["attempts"]["model"] == 3
    assert report["status"] == "SUCCEEDED"  # the human's retry reset the budget; the model recovered


def test_a_verifier_failure_is_fed_back(stack, triage, clean):
    report = _run(stack, triage, faults=[Fault("verifier_fail", 8)])
    assert report["status"] == "SUCCEEDED" and report["output"] == clean["output"]
    assert report["attempts"]["semantic"] == 1 and report["escalations"] == []


def test_verifier_failures_past_the_budget_escalate(stack, triage):
    report = _run(stack, triage, faults=[Fault("verifier_fail", 8), Fault("verifier_fail", 9)])
    (escalation,) = report["escalations"]
    assert (escalation["turn"], escalation["error"]) == (10, "VerifierBudgetError")


HERD = 20


def test_retry_delays_of_runs_throttled_together_are_spread(stack, triage):
    """20 runs throttled at the same moment must not all come back at the same moment."""
    stack.reset_data()
    one_turn = Scenario.model_validate({**triage.model_dump(), "turns": {0: triage.turns[8].model_dump()}, "approvals": {}})
    lock = threading.Lock()
    throttled: set[str] = set()

    def throttle_first_call(point, run_id, turn, call):
        with lock:
            first = point == faults.BEFORE_MODEL and run_id not in throttled
            throttled.add(run_id)
        if first:
            raise ThrottledError("throttled with everyone else")

    from longstep_kit.local.runner import start_input

    sfn = stack.client("stepfunctions")
    delays_before = len(stack.clock.retry_delays)
    faults.set_hook(throttle_first_call)
    try:
        arns = [
            sfn.start_execution(
                stateMachineArn=stack.state_machine_arn, name=f"herd-{i}", input=json.dumps(start_input(stack, one_turn, f"herd-{i}"))
            )["executionArn"]
            for i in range(HERD)
        ]
        for arn in arns:
            wait_execution(sfn, arn, 120)
    finally:
        faults.set_hook(None)
    assert all(sfn.describe_execution(executionArn=a)["status"] == "SUCCEEDED" for a in arns)
    delays = stack.clock.retry_delays[delays_before:]
    assert len(delays) == HERD
    assert all(0 <= d <= 1.0 for d in delays)  # full jitter: uniform in [0, interval]
    # 20 draws in 1,000 bins collide 0.19 times on average; four collisions: about 1 in 20,000.
    assert len({round(d, 3) for d in delays}) > HERD - 4
    assert statistics.pstdev(delays) > 0.15
