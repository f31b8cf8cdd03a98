"""No record a live run needs expires while the run lives (issues 12 and 24).

The stack here keeps records 14 days (the shortest retention its approvals and escalations allow)
and DynamoDB TTL runs on the virtual clock: the local stack deletes a record the moment its
``expires_at`` passes. Each kind of long wait runs alone and mixed, in the same turn, with calls
whose records are written after the turn started (an effect, a short wait): every record must
outlive the wait, and the run must end as it would with no TTL at all.
"""

from __future__ import annotations

from typing import Any

import pytest

from longstep import keys
from longstep.store import CheckpointStore
from longstep.subagents import child_run_id
from longstep_kit.local.runner import RunOptions, run_scenario
from longstep_kit.local.scenario import Scenario
from longstep_kit.local.stack import LocalStack

from tests.local.conftest import delegate_context
from tests.conftest import campaign

DAY = 86_400
RETENTION_DAYS = 14
LONG = (RETENTION_DAYS + 6) * DAY  # a wait the retention alone would not survive
TICKET = {"name": "file_ticket", "input": {"title": "Gateway timeout", "body": "Set the provider timeout to 5 s.", "priority": "P1"}}
EMAIL = {"name": "send_email", "input": {"to": "oncall@example.com", "subject": "Outage", "body": "The provider timeout should be 5 s."}}


@pytest.fixture(scope="module")
def stack():
    with LocalStack(context=delegate_context(retention_days=RETENTION_DAYS, subagent_timeout_hours=60 * 24)) as local:
        yield local


def _triage(triage, name: str, calls: list[dict[str, Any]], **extra: Any) -> Scenario:
    return Scenario.model_validate(
        {
            "name": name,
            "input": {"goal": "Fix the gateway timeout, then wait.", "agent": "triage", "max_turns": 3},
            "world": triage.world,
            "turns": {"0": {"text": "Acting, then waiting.", "tool_calls": calls}, "1": {"text": "Summary: acted and waited."}},
            **extra,
        }
    )


def _run(stack, scenario: Scenario, run_id: str) -> tuple[dict[str, Any], CheckpointStore]:
    stack.reset_data()
    report = run_scenario(stack, scenario, RunOptions(run_id=run_id, execution_name=f"{run_id}-1", timeout_seconds=300))
    return report, CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))


def _assert_kept(report: dict[str, Any], store: CheckpointStore, run_id: str, calls: int) -> None:
    """The run ended with every record of its waiting turn, kept a retention past its end."""
    assert report["status"] == "SUCCEEDED", report.get("error")
    assert store.get_step(run_id, keys.model_step_key(0)) is not None
    for call in range(calls):
        assert store.get_step(run_id, keys.tool_step_key(0, call)) is not None, f"call {call} lost its record"
    finished = store.get(run_id, keys.FINAL_RECORD)["finished_at"]
    ttl = keys.checkpoint_table().ttl_attribute
    for record in store.query_between(run_id, "!", "~"):
        assert float(record[ttl]) >= finished + RETENTION_DAYS * DAY, record["sk"]


TIMER = {"name": "wait_for", "input": {"seconds": LONG}}
EVENT = {"name": "wait_for", "input": {"event": "quarterly_review", "timeout_seconds": LONG}}
CONDITION = {
    "name": "wait_for",
    "input": {"condition": "ticket_status", "args": {"ticket_id": "NOPE-1", "status": "done"}, "timeout_seconds": LONG, "check_every_seconds": 3600},
}


# A wait alone (timer, event) is the case with an effect minus the effect: the suite runs the
# cases with one; `make campaign` runs them all.
@pytest.mark.parametrize(
    "name,calls",
    campaign(
        [
            ("timer", [TIMER]),
            ("timer_and_effect", [TICKET, TIMER]),  # fails before issue 24: the ticket's record expired mid-wait
            ("event", [EVENT]),
            ("event_and_effect", [EVENT, TICKET]),  # idem
            ("condition_and_effect", [TICKET, CONDITION]),  # idem
            ("approved_email_and_timer", [EMAIL, TIMER]),  # idem: the case (the email really went out)
        ],
        lambda case: case[0] not in ("timer", "event"),
    ),
)
def test_a_long_wait_keeps_every_record_of_its_turn(stack, triage, name, calls):
    run_id = f"keep-{name.replace('_', '-')}"
    report, store = _run(stack, _triage(triage, name, calls), run_id)
    _assert_kept(report, store, run_id, len(calls))


def test_an_approval_that_times_out_next_to_a_long_timer_keeps_the_turn(stack, triage):
    # The approval waits its whole timeout (7 days, half the retention): the email's record is
    # written then, and must outlive the timer that started with it.
    scenario = _triage(triage, "approval_timeout", [EMAIL, TIMER], approvals={"0:0": {"decision": "timeout"}})
    report, store = _run(stack, scenario, "keep-approval-timeout")
    _assert_kept(report, store, "keep-approval-timeout", 2)
    assert store.get_step("keep-approval-timeout", keys.tool_step_key(0, 0)).result["status"] == "error"


def _delegating(delegate, name: str, calls: list[dict[str, Any]]) -> Scenario:
    """The lead delegates one question; the research child waits ``LONG`` before it answers."""
    child = {
        "turns": {
            "0": {"text": "Waiting for the data.", "tool_calls": [{"name": "wait_for", "input": {"seconds": LONG}}]},
            "1": {"text": "Finding: the provider's latency rose above 8 s."},
        }
    }
    research = {"name": "research", "input": {"goal": "What happened to payment latency?"}}
    script = delegate.model_dump(mode="json", exclude_none=True)
    script.update(
        name=name,
        turns={"0": {"text": "Asking research.", "tool_calls": [research, *calls]}, "1": {"text": "Conclusion: the provider was slow."}},
        subagents={"t0c0": child},
    )
    return Scenario.model_validate(script)


@pytest.mark.parametrize("name,calls", [("subagent", []), ("subagent_and_wait", [{"name": "wait_for", "input": {"seconds": 60}}])])
def test_a_long_child_run_keeps_its_parents_records(stack, delegate, name, calls):
    # Fails before issue 24: the parent's reply (alone) and its short wait's result (mixed)
    # expired while the child ran, though the subagent timeout allowed the wait.
    run_id = f"keep-{name.replace('_', '-')}"
    report, store = _run(stack, _delegating(delegate, name, calls), run_id)
    _assert_kept(report, store, run_id, 1 + len(calls))
    child = child_run_id(run_id, 0, 0)
    assert store.get(child, keys.FINAL_RECORD) is not None
