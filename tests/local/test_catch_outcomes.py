"""Each state that once had no Catch, failing for good on the local stack (issue 25): Init, Finish,
ContinueAsNew, and a call's RequestApproval and WaitForEvent escalate like every other step (the
record names the step; a retry enters the same state again; a second failure is aborted by the
local answerer: EscalationAborted), and a start input Init refuses fails the run at once.

The failure is a permanent error raised by the state's real Lambda handler, reached through the
local stack's dispatcher (the handler's module attribute is wrapped for the test's run only).
"""

from __future__ import annotations

import importlib
import json
from typing import Any

import pytest

from longstep_kit import cli
from longstep_kit.local.runner import RunOptions, run_scenario
from longstep_kit.local.scenario import Scenario
from longstep_kit.testing.wait import wait_execution, wait_until
from longstep.errors import ModelAccessError
from longstep.humans import escalations
from longstep.store import CheckpointStore
from tests.local.conftest import Background

SUMMARY = {"text": "Summary: done."}


def _scenario(name: str, turns: dict[str, Any], **extra: Any) -> Scenario:
    return Scenario.model_validate(
        {"name": name, "input": {"goal": "Do the one thing.", "agent": "triage", "max_turns": 4, **extra.pop("input", {})}, "turns": turns, **extra}
    )


ONE_TURN = _scenario("one-turn", {"0": SUMMARY})
# Two turns in two executions: ContinueAsNew hands the run over before turn 1.
HANDED_OVER = _scenario(
    "handed-over",
    {"0": {"text": "Looking.", "tool_calls": [{"name": "search_docs", "input": {"query": "checkout"}}]}, "1": SUMMARY},
    input={"turns_per_execution": 1},
)
APPROVED = _scenario(
    "approved",
    {
        "0": {"text": "Mailing.", "tool_calls": [{"name": "send_email", "input": {"to": "a@example.com", "subject": "Hi", "body": "Hello."}}]},
        "1": SUMMARY,
    },
)
EVENT = _scenario(
    "event",
    {"0": {"text": "Waiting.", "tool_calls": [{"name": "wait_for", "input": {"event": "deploy_approved", "timeout_seconds": 3600}}]}, "1": SUMMARY},
    signals=[{"event": "deploy_approved", "payload": {"approver": "alice"}, "at": "start"}],
)


def _fail(monkeypatch, module: str, times: int) -> list[int]:
    """The state's handler raises a permanent error on its next ``times`` invocations; returns the
    count of failures it injected (one element, updated)."""
    target = importlib.import_module(f"longstep_functions.{module}")
    real = target.lambda_handler
    injected = [0]

    def handler(event: Any, context: Any) -> Any:
        if injected[0] < times:
            injected[0] += 1
            raise ModelAccessError(f"injected permanent failure in {module}")
        return real(event, context)

    monkeypatch.setattr(target, "lambda_handler", handler)
    return injected


def _store(stack) -> CheckpointStore:
    return CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))


@pytest.mark.parametrize(
    ("module", "scenario", "task", "turn", "call"),
    [
        ("finish", ONE_TURN, "Finish", 1, None),
        ("continue_as_new", HANDED_OVER, "ContinueAsNew", 1, None),
        ("request_approval", APPROVED, "RequestApproval", 0, 0),
        ("wait_for_event", EVENT, "WaitForEvent", 0, 0),
    ],
    ids=["finish", "continue-as-new", "request-approval", "wait-for-event"],
)
def test_a_permanent_failure_escalates_and_a_retry_enters_the_state_again(stack, monkeypatch, module, scenario, task, turn, call):
    injected = _fail(monkeypatch, module, times=1)
    report = run_scenario(stack, scenario, RunOptions(run_id=f"caught-{module.replace('_', '-')}", timeout_seconds=60))
    assert injected == [1]
    assert report["status"] == "SUCCEEDED", report.get("cause")
    assert report["output"] == "Summary: done."
    (escalation,) = report["escalations"]
    assert (escalation["task"], escalation["turn"], escalation["call"], escalation["error"]) == (task, turn, call, "ModelAccessError")
    assert escalation["resolution"]["action"] == "retry" and escalation["times"] == 1


def test_a_failure_that_comes_back_after_the_retry_is_aborted(stack, monkeypatch):
    injected = _fail(monkeypatch, "finish", times=2)
    report = run_scenario(stack, ONE_TURN, RunOptions(run_id="caught-finish-twice", timeout_seconds=60))
    assert injected == [2]
    assert report["status"] == "FAILED" and report["error"] == "EscalationAborted"
    (escalation,) = report["escalations"]
    assert escalation["task"] == "Finish" and escalation["times"] == 2 and escalation["resolution"]["action"] == "abort"


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_an_init_failure_is_listed_refuses_a_skip_and_is_retried_from_the_cli(stack, monkeypatch, capsys):
    run_id = "caught-init"
    injected = _fail(monkeypatch, "init_run", times=1)
    with stack.clock.held():  # the escalation's timeout does not fire while the human looks
        background = Background(stack, ONE_TURN, RunOptions(run_id=run_id, approve="external", timeout_seconds=60))
        store = _store(stack)
        wait_until("the escalation", lambda: escalations.pending_escalations(store, run_id), 30.0)
        code, out, _ = _cli(capsys, "escalations", "--run", run_id, "--json")
        (listed,) = json.loads(out)
        assert code == 0 and (listed["turn"], listed["call"], listed["task"], listed["error"]) == (0, None, "Init", "ModelAccessError")
        code, _, err = _cli(capsys, "resolve", run_id, "0", "--skip", json.dumps("anything"))
        assert code != 0 and "Init has no result to skip with" in err
        assert escalations.pending_escalations(store, run_id) != []  # the refused answer changed nothing
        code, out, _ = _cli(capsys, "resolve", run_id, "0", "--retry")
        assert code == 0 and out.startswith("retry")
    report = background.result()
    assert injected == [1]
    assert report["status"] == "SUCCEEDED" and report["output"] == "Summary: done."
    (escalation,) = report["escalations"]
    assert escalation["task"] == "Init" and escalation["resolution"]["action"] == "retry"


def test_a_start_input_init_refuses_fails_the_run_at_once_with_its_error(stack):
    sfn = stack.client("stepfunctions")
    bad = {"run_id": "caught-bad-input", "agent": "triage", "goal": "x", "max_turns": "many"}
    arn = sfn.start_execution(stateMachineArn=stack.state_machine_arn, name="caught-bad-input", input=json.dumps(bad))["executionArn"]
    described = wait_execution(sfn, arn, timeout=30.0)
    assert described["status"] == "FAILED" and described["error"] == "InvalidInputError"
    assert "max_turns" in described["cause"]
    assert escalations.pending_escalations(_store(stack), "caught-bad-input") == []
