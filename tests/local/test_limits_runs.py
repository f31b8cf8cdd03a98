"""A Longstep run that would pass one of AWS's limits fails locally with AWS's error, and the
runtime's own guards keep the same run under the limit (issue 12, Done when).

- 400 KB items (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html):
  the step record of a large tool output, with the offload and the runtime's own 350 KiB check
  taken away, is refused by DynamoDB with ``ValidationException`` ("Item size has exceeded the
  maximum allowed size"). The guards: outputs above ``offload_threshold_bytes`` (16 KiB) go to
  S3, and a record over ``longstep.store.MAX_ITEM_BYTES`` is refused before the write.
- 256 KiB of state (https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html):
  the state carries routing and references, never a tool's output, so even an output of
  288 KiB that is not offloaded leaves every task's answer small. A state that does pass the
  limit fails with ``States.DataLimitExceeded``, also inside the ToolCalls Map
  (tests/local/test_fidelity_limits.py).
- 25,000 history events (same quota page: "Maximum execution history size"): an execution that
  runs on past the limit fails with ``States.Runtime`` (AWS documents that the execution fails,
  not the error name: docs/local-fidelity.md), here from inside the ToolCalls Map. The guard:
  the run hands over to a new execution after ``turns_per_execution`` turns (computed by the
  stack from the worst case of events per turn). The limit is lowered here: the check is the
  same at 25,000, and reaching it takes hundreds of turns.
"""

from __future__ import annotations

import json
import random
import string

import pytest

from longstep.settings import ENV_OFFLOAD_THRESHOLD_BYTES
from longstep_kit.local import limits
from longstep_kit.local.runner import RunOptions, run_scenario
from longstep_kit.local.scenario import Scenario

# Random text: step records are compressed when that makes them smaller, and these must not shrink.
_RANDOM = random.Random(12)
STATE_BODY = "".join(_RANDOM.choices(string.ascii_letters + string.digits, k=288 * 1024))  # over a state's 256 KiB
ITEM_BODY = "".join(_RANDOM.choices(string.ascii_letters + string.digits, k=768 * 1024))  # over an item's 400 KB, compressed too


def _reading(name: str, body: str) -> Scenario:
    """One turn that reads a document of ``body``, then a summary."""
    return Scenario.model_validate(
        {
            "name": name,
            "input": {"goal": "Read the log.", "agent": "triage", "max_turns": 3},
            "world": {"documents": [{"doc_id": "log", "title": "Log", "summary": "the log", "body": body}]},
            "turns": {"0": {"tool_calls": [{"name": "read_document", "input": {"doc_id": "log"}}]}, "1": {"text": "Summary: read the log."}},
        }
    )


@pytest.fixture
def no_offload(stack):
    """The deployed functions, with an offload threshold above any output: the guard taken away."""

    def raise_threshold(inv):
        inv.environment[ENV_OFFLOAD_THRESHOLD_BYTES] = str(64 * 1024 * 1024)

    stack.dispatcher.before_invoke.append(raise_threshold)
    yield
    stack.dispatcher.before_invoke.remove(raise_threshold)


def _run(stack, scenario: Scenario, run_id: str) -> dict:
    stack.reset_data()
    return run_scenario(stack, scenario, RunOptions(run_id=run_id, timeout_seconds=120))


def test_a_tool_output_never_reaches_the_state(stack, no_offload):
    """The state carries routing, never content: CallTool answers with the call's status (its
    output is in the step record), so even a 288 KiB output, not offloaded, leaves every state
    far under 256 KiB. A state that did pass it fails as ``test_fidelity_limits`` shows."""
    seen = []
    stack.dispatcher.after_invoke.append(seen.append)
    try:
        report = _run(stack, _reading("state-limit", STATE_BODY), "limits-state")
    finally:
        stack.dispatcher.after_invoke.remove(seen.append)
    assert report["status"] == "SUCCEEDED", report.get("cause")
    largest = max(len(json.dumps(inv.result)) for inv in seen if inv.error is None)
    assert largest < 16 * 1024 < limits.MAX_PAYLOAD_BYTES


def test_a_step_record_over_400_kb_is_refused_with_validation_exception(stack, no_offload, monkeypatch):
    import longstep.store

    monkeypatch.setattr(longstep.store, "MAX_ITEM_BYTES", 64 * 1024 * 1024)  # the runtime's own check too
    seen = []
    stack.dispatcher.after_invoke.append(seen.append)
    try:
        report = _run(stack, _reading("item-limit", ITEM_BODY), "limits-item")
    finally:
        stack.dispatcher.after_invoke.remove(seen.append)
    assert report["status"] != "SUCCEEDED"
    errors = [inv.error for inv in seen if inv.task == "call_tool" and inv.error is not None]
    assert errors, "CallTool should have failed"
    # The result is written into the step's claim with UpdateItem (longstep.claims), whose message
    # is DynamoDB's "Item size to update has exceeded the maximum allowed size".
    assert all(
        "ValidationException" in e["errorMessage"] and "Item size to update has exceeded the maximum allowed size" in e["errorMessage"]
        for e in errors
    )


def test_the_runtime_refuses_a_record_over_its_own_item_limit_first(stack, no_offload):
    """Without the offload, the runtime's own check (350 KiB, under DynamoDB's 400 KB) stops the write."""
    seen = []
    stack.dispatcher.after_invoke.append(seen.append)
    try:
        report = _run(stack, _reading("item-guard", ITEM_BODY), "limits-item-guard")
    finally:
        stack.dispatcher.after_invoke.remove(seen.append)
    assert report["status"] != "SUCCEEDED"
    errors = [inv.error for inv in seen if inv.task == "call_tool" and inv.error is not None]
    assert errors and all(e["errorType"] == "RecordTooLargeError" for e in errors)


@pytest.mark.parametrize("body", [STATE_BODY, ITEM_BODY])
def test_the_offload_keeps_the_same_runs_under_both_limits(stack, body):
    report = _run(stack, _reading("offloaded", body), f"limits-offloaded-{len(body)}")
    assert report["status"] == "SUCCEEDED", report.get("cause")


@pytest.fixture
def history_limit(stack):
    """The history quota lowered to ``LOW`` events (the same check as at 25,000)."""
    patches = stack.enforcement.patches
    patches.max_history_events = LOW
    yield
    patches.max_history_events = limits.MAX_HISTORY_EVENTS


LOW = 120  # the triage scenario's one execution has about 250 events


def test_a_run_past_the_history_limit_fails_with_states_runtime(stack, triage, history_limit):
    report = _run(stack, triage, "limits-history")
    assert (report["status"], report["error"]) == ("FAILED", "States.Runtime")
    assert "maximum number of history events" in report["cause"]


def test_handing_over_to_new_executions_keeps_the_run_under_the_history_limit(stack, triage, history_limit):
    handed = _run(stack, triage.model_copy(update={"input": triage.input.model_copy(update={"turns_per_execution": 2})}), "limits-history-handed")
    assert handed["status"] == "SUCCEEDED", handed.get("cause")
    assert handed["executions"] > 1
    assert handed["history_events"] > LOW  # the run as a whole passed the limit, no execution did
