"""Pausing for days on the local stack: approvals (four in one turn, one timing out after 3 days),
decisions and signals from the ``longstep`` commands, ``wait_for`` events and timers, and each
answer to an escalation. The virtual clock skips to each timeout when nothing else can happen;
a test playing a human holds it (``stack.clock.held()``) while it answers.

The module deploys the stack with ``approval_timeout_hours: 72``: the 3-day approval timeout is
the one the synthesized state machine declares, as it would deploy.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

from longstep_kit import cli
from longstep_kit.local.faults import Fault
from longstep_kit.local.report import build_report
from longstep_kit.local.runner import RunOptions, choose_decision, run_scenario, start_input
from longstep_kit.local.scenario import Scenario, load_scenario
from longstep_kit.local.stack import LocalStack
from longstep_kit.local.world import check_and_seed
from longstep_kit.ops import runs
from longstep_kit.testing.wait import wait_execution, wait_until
from longstep.humans import escalations, signals
from longstep.humans.decisions import decide
from longstep.humans.requests import pending_approvals
from longstep.humans.table import ApprovalTable
from longstep.store import CheckpointStore
from tests.local.conftest import Background, sent_emails

SCENARIOS = Path(__file__).resolve().parents[2] / "events" / "scenarios"
THREE_DAYS = 3 * 86_400
MOTO_CALLER = "arn:aws:sts::123456789012:user/moto"  # who the CLI's decisions are recorded as


@pytest.fixture(scope="module")
def stack():
    with LocalStack(context={"longstep": {"approval_timeout_hours": 72}}) as local:
        yield local


def _store(stack) -> CheckpointStore:
    return CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))


def _approvals(stack) -> ApprovalTable:
    return ApprovalTable(stack.outputs["ApprovalsTableName"], stack.client("dynamodb"))


def _tool_results(stack, run_id: str) -> dict[tuple[int, int], dict[str, Any]]:
    """(turn, call) -> the recorded tool result the model was told."""
    out = {}
    for step in _store(stack).steps(run_id):
        if step.kind == "tool":
            _, turn, _, call = step.sk.split("#")
            out[(int(turn), int(call))] = step.result
    return out


def _wait_until(what: str, check: Callable[[], Any], timeout: float = 30.0) -> Any:
    return wait_until(what, check, timeout)


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- approvals ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def approvals_run(stack):
    return run_scenario(stack, load_scenario(SCENARIOS / "approvals.json"), RunOptions(run_id="approvals-auto"))


def test_four_approvals_in_one_turn_resolve_independently(stack, approvals_run):
    scenario = load_scenario(SCENARIOS / "approvals.json")
    assert approvals_run["status"] == "SUCCEEDED"
    for phrase in scenario.expect.output_contains:
        assert phrase in approvals_run["output"]
    assert [(a["turn"], a["call"], a["status"]) for a in approvals_run["approvals"]] == [
        (0, 0, "approved"),
        (0, 1, "rejected"),
        (0, 2, "edited"),
        (0, 3, "expired"),
    ]
    assert approvals_run["approvals"][1]["decision"]["reason"] == "too broad an audience"
    # What the model was told, call by call.
    results = _tool_results(stack, "approvals-auto")
    assert results[(0, 0)]["status"] == "success"
    assert results[(0, 1)] == {"status": "error", "content": {"error": "rejected by the approver: too broad an audience", "rejected": True}}
    assert results[(0, 2)]["status"] == "success"
    assert results[(0, 3)]["status"] == "error" and results[(0, 3)]["content"]["timed_out"] is True
    # What happened in the world: the approved email and the edited one, nothing else.
    assert sent_emails(stack, "approvals-auto") == [
        ("payments-oncall@example.com", "Checkout incident"),
        ("team-orders@example.com", "Action needed: retry storm"),
    ]
    assert approvals_run["effects"]["duplicate_effects"] == 0


def test_a_three_day_approval_timeout_fires_after_three_virtual_days(stack, approvals_run):
    definition = json.loads(stack.client("stepfunctions").describe_state_machine(stateMachineArn=stack.state_machine_arn)["definition"])
    request_approval = definition["States"]["ToolCalls"]["ItemProcessor"]["States"]["RequestApproval"]
    assert request_approval["TimeoutSeconds"] == THREE_DAYS  # the deployed definition: no test-only shortcut
    # Time stood still while anything ran and jumped once, to the unanswered request's timeout.
    assert approvals_run["virtual_seconds"] == THREE_DAYS
    (expired,) = [a for a in approvals_run["approvals"] if a["status"] == "expired"]
    assert expired["decision"] == {"decision": "timeout"} and expired["approver"] is None
    assert pending_approvals(_approvals(stack), "approvals-auto") == []


def test_approvers_decide_with_the_cli(stack, capsys):
    run_id = "approvals-cli"
    with stack.clock.held():  # time stands still while the humans decide
        background = Background(stack, load_scenario(SCENARIOS / "approvals.json"), RunOptions(run_id=run_id, approve="external"))
        table = _approvals(stack)
        _wait_until("four pending approvals", lambda: len(pending_approvals(table, run_id)) == 4)

        code, out, _ = _cli(capsys, "approvals", "--run", run_id, "--json")
        listed = json.loads(out)
        assert code == 0 and [(a["call"], a["tool"], a["status"]) for a in listed] == [(c, "send_email", "pending") for c in range(4)]
        assert "task_token" not in out and all(table.get(a["approval_id"])["task_token"] not in out for a in listed)
        ids = [a["approval_id"] for a in listed]
        code, out, _ = _cli(capsys, "approvals", "--run", run_id)
        assert code == 0 and all(i in out for i in ids)

        # Each is decided by its id, out of order (last call first): each decision reaches its own call.
        edited = {"to": "team-orders@example.com", "subject": "Action needed: retry storm", "body": "Add backoff with jitter."}
        code, out, _ = _cli(capsys, "reject", ids[3], "--reason", "not to the CTO")
        assert code == 0 and out.startswith(f"rejected: {ids[3]}")
        code, _, err = _cli(capsys, "approve", ids[2], "--edit", json.dumps({"to": "team-orders@example.com"}))
        assert code == 2 and "input.subject: is required" in err  # refused before anything is written, in plain words
        assert table.get(ids[2])["status"] == "pending"
        assert _cli(capsys, "approve", ids[2], "--edit", json.dumps(edited))[0] == 0
        assert _cli(capsys, "approve", ids[0])[0] == 0
        assert _cli(capsys, "reject", ids[1], "--reason", "too broad an audience")[0] == 0
        code, _, err = _cli(capsys, "approve", ids[0])
        assert code == 2 and "already approved" in err  # the first decision stands

    report = background.result()
    assert report["status"] == "SUCCEEDED"
    assert [(a["status"], a["approver"]) for a in report["approvals"]] == [
        ("approved", MOTO_CALLER),
        ("rejected", MOTO_CALLER),
        ("edited", MOTO_CALLER),
        ("rejected", MOTO_CALLER),
    ]
    assert sorted(subject for _, subject in sent_emails(stack, run_id)) == ["Action needed: retry storm", "Checkout incident"]


def test_stop_and_resume_in_the_middle_of_an_approval_gives_the_clean_transcript(stack, approvals_run):
    """StopExecution ends a run parked on approval tokens inside the tool-call Map (as in AWS);
    ``resume`` starts the next generation, which takes the pending requests over."""
    scenario = load_scenario(SCENARIOS / "approvals.json")
    run_id = "approvals-stopped"
    sfn, table = stack.client("stepfunctions"), _approvals(stack)
    first = len(stack.dispatcher.invocations)
    check_and_seed(stack, scenario)
    with stack.clock.held():
        payload = json.dumps(start_input(stack, scenario, run_id))
        parked = sfn.start_execution(stateMachineArn=stack.state_machine_arn, name=run_id, input=payload)["executionArn"]
        _wait_until("four pending approvals", lambda: len(pending_approvals(table, run_id)) == 4)
        tokens = {a["approval_id"]: table.get(a["approval_id"])["task_token"] for a in pending_approvals(table, run_id)}
        sfn.stop_execution(executionArn=parked, error="Operator", cause="restarting mid-wait")
        stopped = wait_execution(sfn, parked, 30)
        assert stopped["status"] == "ABORTED"
        resumed = runs.resume(sfn, stack.state_machine_arn, run_id)
        # The new generation's RequestApproval tasks take the same requests over with new tokens.
        _wait_until("the requests on new tokens", lambda: all(table.get(i)["task_token"] != t for i, t in tokens.items()))
        for request in pending_approvals(table, run_id):
            decision = choose_decision(scenario, _store(stack), request, RunOptions())
            if decision is not None:  # the scripted timeout is left to time out
                decide(table, sfn, request["approval_id"], decision)
    assert wait_execution(sfn, resumed, 60)["status"] == "SUCCEEDED"
    report = build_report(stack, run_id, [parked, resumed], first, 0.0)
    assert report["transcript_sha256"] == approvals_run["transcript_sha256"]
    assert report["effects"]["duplicate_effects"] == 0


# -- wait_for ------------------------------------------------------------------------------------


def test_signals_sent_before_and_after_the_wait_reach_the_model(stack):
    scenario = load_scenario(SCENARIOS / "wait_for_event.json")
    report = run_scenario(stack, scenario, RunOptions(run_id="wait-event"))
    assert report["status"] == "SUCCEEDED"
    for phrase in scenario.expect.output_contains:
        assert phrase in report["output"]
    results = _tool_results(stack, "wait-event")
    # ci_finished was sent once the run waited; deploy_approved before it waited (kept, then taken).
    assert results[(0, 0)]["content"] == {"waited": "event", "event": "ci_finished", "payload": {"status": "green", "build": 42}}
    assert results[(1, 0)]["content"] == {"waited": "event", "event": "deploy_approved", "payload": {"approver": "alice"}}
    # Nobody sent rollback_alarm: its 3-day wait timed out, the only time that passed.
    assert results[(2, 0)]["content"] == {"waited": "event", "event": "rollback_alarm", "timed_out": True}
    assert report["virtual_seconds"] == THREE_DAYS
    store = _store(stack)
    for event in ("ci_finished", "deploy_approved"):
        entries = store.query_prefix("wait-event", signals.signal_key(event) + "#")
        assert [e["status"] for e in entries] == [signals.CONSUMED]


def test_signals_from_the_cli_before_and_after_the_wait(stack, capsys):
    run_id = "wait-cli"
    original = load_scenario(SCENARIOS / "wait_for_event.json")
    scenario = Scenario.model_validate(
        {**original.model_dump(), "name": "wait-cli", "signals": [], "turns": {0: original.turns[0], 1: original.turns[1], 2: original.turns[3]}}
    )
    code, out, _ = _cli(capsys, "signal", run_id, "deploy_approved", "--payload", '{"approver": "bob"}', "--buffer")
    assert (code, out.split(":")[0]) == (0, "buffered")  # before the run even started: kept
    with stack.clock.held():  # the 2-day wait does not time out while the test sends its signals
        background = Background(stack, scenario, RunOptions(run_id=run_id, approve="external"))
        store = _store(stack)
        _wait_until("the ci_finished wait", lambda: (store.get(run_id, signals.signal_key("ci_finished")) or {}).get("status") == signals.WAITING)
        code, out, _ = _cli(capsys, "signal", run_id, "ci_finished", "--payload", '{"status": "red", "build": 6}')
        assert (code, out.split(":")[0]) == (0, "buffered")  # the wait matches status green only: kept for one that matches
        code, out, _ = _cli(capsys, "signal", run_id, "ci_finished", "--payload", '{"status": "green", "build": 7}')
        assert (code, out.split(":")[0]) == (0, "delivered")
        code, _, err = _cli(capsys, "signal", run_id, "ci_finished", "--payload", "[1, 2]")
        assert code == 2 and "payload" in err

    report = background.result()
    assert report["status"] == "SUCCEEDED"
    results = _tool_results(stack, run_id)
    assert results[(0, 0)]["content"]["payload"] == {"status": "green", "build": 7}
    assert results[(1, 0)]["content"]["payload"] == {"approver": "bob"}
    # The run has finished: a signal says so (exit 2, one line), and so does one to no run at all.
    code, out, err = _cli(capsys, "signal", run_id, "ci_finished", "--payload", '{"status": "green"}')
    assert (code, out) == (2, "") and err.splitlines() == [f"error: run_id: run {run_id!r} has finished: nothing will wait for 'ci_finished' again"]
    code, _, err = _cli(capsys, "signal", "no-such-run", "ci_finished")
    assert code == 2 and err.splitlines() == [
        "error: run_id: no run 'no-such-run' (hint: pass --buffer to keep the signal for a run that starts later)"
    ]


def test_a_two_day_timer_then_a_one_hour_timer_fire_at_their_virtual_time(stack):
    first = len(stack.clock.waits)
    report = run_scenario(stack, load_scenario(SCENARIOS / "wait_for_timer.json"), RunOptions(run_id="wait-timer"))
    waits = stack.clock.waits[first:]
    assert report["status"] == "SUCCEEDED" and "waited two days" in report["output"]
    # The Wait states waited two days, then one hour, to the second (counted from the recorded
    # reply, on the clock the handlers read), and no other time passed.
    assert waits == [2 * 86_400, 3_600]
    assert report["virtual_seconds"] == 2 * 86_400 + 3_600
    results = _tool_results(stack, "wait-timer")
    assert results[(1, 0)]["content"]["waited"] == "timer" and results[(2, 0)]["content"]["waited"] == "timer"
    assert results[(3, 0)]["status"] == "success"  # the follow-up ran after the waits


# -- escalations ---------------------------------------------------------------------------------

ONE_TURN = Scenario.model_validate(
    {
        "name": "one-turn",
        "input": {"goal": "Say what you found.", "agent": "triage", "max_turns": 3},
        "turns": {"0": {"text": "Summary: nothing new."}},
    }
)


@pytest.mark.parametrize(
    ("answer", "status", "output"),
    [
        (["--retry"], "SUCCEEDED", "Summary: nothing new."),
        (["--skip", json.dumps("Summary: a human wrote this.")], "SUCCEEDED", "Summary: a human wrote this."),
        (["--abort"], "FAILED", None),
    ],
    ids=["retry", "skip", "abort"],
)
def test_each_answer_to_an_escalation(stack, capsys, answer, status, output):
    run_id = f"escalation-{answer[0].lstrip('-')}"
    with stack.clock.held():  # the 7-day escalation timeout does not fire while the human looks
        background = Background(stack, ONE_TURN, RunOptions(run_id=run_id, approve="external", faults=[Fault("permanent", 0)]))
        store = _store(stack)
        _wait_until("the escalation", lambda: escalations.pending_escalations(store, run_id))

        code, out, _ = _cli(capsys, "escalations", "--run", run_id, "--json")
        (listed,) = json.loads(out)
        assert code == 0 and (listed["turn"], listed["call"], listed["task"], listed["error"]) == (0, None, "ModelTurn", "ModelAccessError")
        code, out, _ = _cli(capsys, "escalations")  # every run's: the checkpoint table is scanned
        assert code == 0 and run_id in out
        code, out, _ = _cli(capsys, "resolve", run_id, "0", *answer)
        assert code == 0 and out.startswith(answer[0].lstrip("-"))

    report = background.result()
    assert report["status"] == status
    (escalation,) = report["escalations"]
    assert escalation["resolution"]["action"] == answer[0].lstrip("-")
    assert escalation["resolution"]["resolver"] == MOTO_CALLER
    if output is not None:
        assert report["output"] == output
    else:
        assert report["error"] == "EscalationAborted"
    assert escalations.pending_escalations(store, run_id) == []
