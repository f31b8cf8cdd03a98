"""``longstep runs``, ``show`` (with ``--cost``) and ``stuck`` against the local stack.

Six runs share one stack: a clean triage run, one with two injected crashes, one that failed at
Init, and three left parked on a task token: one escalated (a permanent model error), one waiting
for an approval and one waiting for an event. Their waits are not answered until the module is done.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from longstep_kit import cli
from longstep_kit.local.faults import Fault, FaultInjector
from longstep_kit.local.runner import RunOptions, run_scenario, start_input
from longstep_kit.local.scenario import load_scenario
from longstep_kit.testing.wait import wait_execution, wait_until
from longstep import keys
from longstep.settings import DEFAULT_MODEL_ID
from longstep.humans import escalations, requests, signals
from longstep.humans.table import ApprovalTable
from longstep.steps import RecordLease
from longstep.store import CheckpointStore

PRICES = Path(__file__).resolve().parents[2] / "infra" / "prices.json"
WAIT_SCENARIO = Path(__file__).resolve().parents[2] / "events" / "scenarios" / "wait_for_event.json"
CLEAN, CRASHED, FAILED = "views-clean", "views-crash", "views-bad"
ESCALATED, APPROVAL, EVENT = "views-esc", "views-appr", "views-wait"
OURS = {CLEAN, CRASHED, FAILED, ESCALATED, APPROVAL, EVENT}


def _until(check, what: str, seconds: float = 30.0):
    return wait_until(what, check, seconds)


@pytest.fixture(scope="module")
def clean(stack, triage):
    return run_scenario(stack, triage, RunOptions(run_id=CLEAN))


@pytest.fixture(scope="module")
def crashed(stack, triage):
    # A crash after the model answered in turn 2, and one before the tool ran in turn 3 call 0.
    return run_scenario(stack, triage, RunOptions(run_id=CRASHED, faults=[Fault("after_model", 2), Fault("before_tool", 3)]))


@pytest.fixture(scope="module")
def failed(stack):
    sfn = stack.client("stepfunctions")
    payload = {"run_id": FAILED, "goal": "g", "agent": "nobody"}
    arn = sfn.start_execution(stateMachineArn=stack.state_machine_arn, name=FAILED, input=json.dumps(payload))["executionArn"]
    return wait_execution(sfn, arn, 30)


@pytest.fixture(scope="module")
def parked(stack, triage):
    """Three runs parked on task tokens, answered (abort, reject, signal) when the module is done."""
    sfn, ddb = stack.client("stepfunctions"), stack.client("dynamodb")
    store = CheckpointStore(stack.outputs["CheckpointTableName"], ddb)
    table = ApprovalTable(stack.outputs["ApprovalsTableName"], ddb)
    # Time stands still while they wait, until the module is done: the clock would otherwise
    # skip to their timeouts (nothing else runs). The module's other runs are done by now.
    stack.clock.hold()
    injector = FaultInjector(plan=[Fault("permanent", 1)], lock=RecordLease)
    injector.install()
    arns = []
    try:
        for run_id in (ESCALATED, APPROVAL):
            arns.append(
                sfn.start_execution(stateMachineArn=stack.state_machine_arn, name=run_id, input=json.dumps(start_input(stack, triage, run_id)))[
                    "executionArn"
                ]
            )
            if run_id == ESCALATED:  # the fault fires once, in this run's turn 1
                _until(lambda: escalations.pending_escalations(store, ESCALATED), "the escalation")
                injector.uninstall()
        _until(lambda: requests.pending_approvals(table, APPROVAL), "the approval request")
        # wait_for_event.json without its signals: turn 0 waits for ci_finished
        waits = load_scenario(WAIT_SCENARIO)
        arns.append(
            sfn.start_execution(stateMachineArn=stack.state_machine_arn, name=EVENT, input=json.dumps(start_input(stack, waits, EVENT)))[
                "executionArn"
            ]
        )
        _until(lambda: (store.get(EVENT, signals.signal_key("ci_finished")) or {}).get("status") == signals.WAITING, "the event wait")
        yield arns
    finally:
        injector.uninstall()
        # Stopped, as AWS stops a run parked on a task token (nothing is left waiting).
        for arn in arns:
            sfn.stop_execution(executionArn=arn, error="TestOver", cause="the module is done")
        stack.clock.release()
    assert {wait_execution(sfn, arn, 10)["status"] for arn in arns} == {"ABORTED"}


@pytest.fixture(scope="module")
def everything(clean, crashed, failed, parked):
    return {"clean": clean, "crashed": crashed}


def _json(capsys, *argv):
    assert cli.main(list(argv) + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _text(capsys, *argv):
    assert cli.main(list(argv)) == 0
    return capsys.readouterr().out


# -- runs -------------------------------------------------------------------------------------


def test_runs_lists_each_run_with_its_status(everything, capsys):
    runs = {r["run_id"]: r for r in _json(capsys, "runs")}
    assert {k: runs[k]["status"] for k in OURS} == {
        CLEAN: "succeeded",
        CRASHED: "succeeded",
        FAILED: "failed",
        ESCALATED: "escalated",
        APPROVAL: "waiting_for_approval",
        EVENT: "waiting_for_event",
    }
    assert "UnknownAgentError" in runs[FAILED]["detail"]
    assert runs[EVENT]["detail"] == 'event ci_finished matching {"status": "green"}'
    assert "ModelAccessError" in runs[ESCALATED]["detail"] and "turn 1" in runs[ESCALATED]["detail"]
    assert runs[APPROVAL]["detail"].startswith("send_email (turn 5, call 0)")
    # the approval was requested after the escalation; approval times are kept to the second
    assert runs[APPROVAL]["since"] >= int(runs[ESCALATED]["since"]) > 0


def test_runs_prints_a_table(everything, capsys):
    out = _text(capsys, "runs")
    assert out.splitlines()[0].split() == ["RUN", "STATUS", "SINCE", "AGE", "DETAIL"]
    row = next(line for line in out.splitlines() if line.startswith(APPROVAL + " "))
    assert row.split()[1] == "waiting_for_approval" and "send_email (turn 5, call 0)" in row


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("succeeded", {CLEAN, CRASHED}),
        ("failed", {FAILED}),
        ("escalated", {ESCALATED}),
        ("waiting_for_approval", {APPROVAL}),
        ("waiting_for_event", {EVENT}),
        ("running", set()),
    ],
)
def test_runs_status_filter(everything, capsys, status, expected):
    runs = _json(capsys, "runs", "--status", status)
    assert {r["status"] for r in runs} <= {status}
    assert {r["run_id"] for r in runs} & OURS == expected


# -- show -------------------------------------------------------------------------------------


def test_show_gives_a_timeline_of_turns_tokens_bytes_and_retries(everything, triage, capsys):
    view = _json(capsys, "show", CRASHED)
    steps = [e for e in view["timeline"] if e["kind"] in ("model", "tool")]
    calls = sum(len(t.tool_calls) for t in triage.turns.values())
    assert [e["turn"] for e in steps if e["kind"] == "model"] == sorted(triage.turns)
    assert sum(1 for e in steps if e["kind"] == "tool") == calls
    assert sum(e["input_tokens"] for e in steps if e["kind"] == "model") == sum(t.input_tokens for t in triage.turns.values())
    assert sum(e["output_tokens"] for e in steps if e["kind"] == "model") == sum(t.output_tokens for t in triage.turns.values())
    retried = {(e["turn"], e["call"]): e["retries"] for e in steps if e["retries"]}
    injected = {(f["turn"], f["call"]): 1 for f in everything["crashed"]["faults_injected"]}  # the call that crashed first
    assert retried == injected and set(injected) - {(2, None)} <= {(3, 0), (3, 1)}  # each crash retried once
    # Durations come from the history, on the stack's virtual clock: no time passes while a
    # handler runs (docs/local-fidelity.md), so each step took 0 s of it.
    assert all(e["seconds"] == 0 and e["bytes"] > 0 for e in steps)
    assert next(e for e in steps if (e["turn"], e["call"]) == (1, 0))["offloaded_bytes"] > 300_000  # the incident report
    approvals_seen = [(e["turn"], e["result"]) for e in view["timeline"] if e["kind"] == "approval"]
    assert approvals_seen == [(5, "approved"), (7, "edited")]
    assert view["usage"]["retries"] == 2 and view["usage"]["turns"] == len(triage.turns)


def test_show_puts_the_last_model_call_beside_the_last_side_effect(everything, capsys):
    out = _text(capsys, "show", CRASHED)
    assert out.startswith(f"run {CRASHED}: succeeded since ")
    assert "TURN  CALL  KIND" in out
    assert "last model call:  turn 8 converse at " in out and out.rstrip().count("end_turn") >= 1
    assert "last side effect: turn 7 call 0 send_email [at_most_once] at " in out
    model_row = next(line for line in out.splitlines() if line.split()[2:6] == ["2", "-", "model", "converse"])
    assert model_row.split()[-3] == "1"  # RETRIES of turn 2's model step (its result is "tool_use: file_ticket")


def test_show_a_run_waiting_for_approval(everything, capsys):
    view = _json(capsys, "show", APPROVAL)
    assert view["state"]["status"] == "waiting_for_approval"
    waiting = [e for e in view["timeline"] if e["kind"] == "approval"]
    assert [(e["turn"], e["call"], e["name"], e["result"]) for e in waiting] == [(5, 0, "send_email", "pending")]
    assert view["last_model_call"]["turn"] == 5
    assert view["last_side_effect"]["name"] == "update_ticket"  # turn 3: nothing was sent yet


def test_show_a_run_waiting_for_an_event(everything, capsys):
    view = _json(capsys, "show", EVENT)
    assert view["state"]["status"] == "waiting_for_event"
    assert [(e["kind"], e["turn"], e["call"], e["name"], e["result"]) for e in view["timeline"]] == [
        ("model", 0, None, "converse", "tool_use: wait_for"),
        ("wait", 0, 0, "ci_finished", "waiting"),
    ]
    assert view["last_side_effect"] is None  # wait_for is a read


def test_no_view_shows_a_task_token(everything, stack, capsys):
    ddb = stack.client("dynamodb")
    store = CheckpointStore(stack.outputs["CheckpointTableName"], ddb)
    table = ApprovalTable(stack.outputs["ApprovalsTableName"], ddb)
    (request,) = requests.pending_approvals(table, APPROVAL)
    tokens = [
        store.get(ESCALATED, keys.escalation_key(1, escalations.MODEL_CALL))["task_token"],
        table.get(request["approval_id"])["task_token"],
        signals.waiters(store.get(EVENT, signals.signal_key("ci_finished")))[0][1],
    ]
    assert all(len(t) > 8 for t in tokens)
    shown = "".join(
        _text(capsys, *argv)
        for argv in [["runs"], ["runs", "--json"], ["stuck", "--older-than", "0s", "--json"]]
        + [["show", run_id, *extra] for run_id in (ESCALATED, APPROVAL, EVENT) for extra in ([], ["--json", "--cost"])]
    )
    assert not [t for t in tokens if t in shown]


def test_show_an_unknown_run_is_an_error(everything, capsys):
    assert cli.main(["show", "views-nobody"]) == 2
    assert "no run named 'views-nobody'" in capsys.readouterr().err


# -- stuck ------------------------------------------------------------------------------------


def test_stuck_lists_waiting_runs_older_than_the_age(everything, capsys):
    stuck = {r["run_id"]: r["status"] for r in _json(capsys, "stuck", "--older-than", "0s")}
    assert stuck == {ESCALATED: "escalated", APPROVAL: "waiting_for_approval", EVENT: "waiting_for_event"}
    out = _text(capsys, "stuck", "--older-than", "0s")
    assert ESCALATED in out and APPROVAL in out and EVENT in out and CLEAN not in out
    assert "3 runs waiting longer than 0s" in out


def test_stuck_leaves_out_runs_younger_than_the_age(everything, capsys):
    assert _json(capsys, "stuck", "--older-than", "2h") == []
    assert _text(capsys, "stuck", "--older-than", "3d").strip() == "no run has waited longer than 3d"


def test_stuck_rejects_a_malformed_age(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["stuck", "--older-than", "soon"])
    assert exc.value.code == 2 and "not an age" in capsys.readouterr().err


# -- cost -------------------------------------------------------------------------------------


def _formula(usage: dict, prices: dict, model: str) -> float:
    """docs/operations.md's formula, written out again from the price table (a geographic profile
    of a listed model pays the entry's ``geographic_premium`` on top)."""
    base = model.split(".", 1)[1] if model not in prices["models"] else model
    m = prices["models"][base]
    factor = 1 + m.get("geographic_premium", 0) if base != model and not model.startswith("global.") else 1
    return (
        (usage["state_transitions"] + usage["retries"]) * prices["step_functions"]["per_1000_state_transitions"] / 1000
        + usage["lambda_gb_seconds"] * prices["lambda"]["per_gb_second"]
        + usage["lambda_invocations"] * prices["lambda"]["per_million_requests"] / 1e6
        + usage["dynamodb_write_units"] * prices["dynamodb"]["per_million_write_request_units"] / 1e6
        + usage["dynamodb_read_units"] * prices["dynamodb"]["per_million_read_request_units"] / 1e6
        + usage["s3_puts"] * prices["s3"]["per_1000_put_requests"] / 1000
        + usage["s3_gets"] * prices["s3"]["per_1000_get_requests"] / 1000
        + usage["input_tokens"] * m["per_million_input_tokens"] * factor / 1e6
        + usage["output_tokens"] * m["per_million_output_tokens"] * factor / 1e6
    )


def test_cost_is_the_formula_applied_to_the_runs_counts(everything, stack, capsys):
    report = everything["crashed"]
    view = _json(capsys, "show", CRASHED, "--cost")
    usage, cost = view["usage"], view["cost"]
    # the counts are the run's: the same transitions and invocations the local run report saw
    assert usage["state_transitions"] == report["state_transitions"]
    assert usage["lambda_invocations"] == report["lambda_invocations"]
    memory = {f["FunctionArn"]: f["MemorySize"] for f in stack.client("lambda").list_functions()["Functions"]}
    attempts = view["attempts"]
    assert len(attempts) == usage["lambda_invocations"] and sum(not a["ok"] for a in attempts) == usage["retries"] == 2
    # The tasks call their functions' versions (pinning): each has its function's memory.
    unqualified = lambda arn: ":".join(arn.split(":")[:7])  # noqa: E731
    assert usage["lambda_gb_seconds"] == pytest.approx(sum(a["seconds"] * memory[unqualified(a["function"])] / 1024 for a in attempts))
    # Every invocation's start and end are on the virtual clock, which stands still while it runs.
    assert all(a["seconds"] == 0 for a in attempts) and usage["lambda_seconds"] == 0
    assert usage["dynamodb_write_units"] > usage["turns"] and usage["dynamodb_read_units"] > usage["turns"] and usage["s3_puts"] == 1
    prices = json.loads(PRICES.read_text())
    assert cost["model"] == DEFAULT_MODEL_ID  # a scripted run is priced as the stack's default model (its profile's price)
    assert cost["total"] > 0
    assert cost["total"] == pytest.approx(_formula(usage, prices, cost["model"]))


def test_cost_follows_the_price_table_given(everything, capsys, tmp_path):
    prices = json.loads(PRICES.read_text())
    prices["step_functions"]["per_1000_state_transitions"] *= 2
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(prices))
    base = _json(capsys, "show", CLEAN, "--cost")
    doubled = _json(capsys, "show", CLEAN, "--cost", "--prices", str(path))
    transitions = base["usage"]["billed_transitions"]
    assert doubled["cost"]["total"] - base["cost"]["total"] == pytest.approx(
        transitions * prices["step_functions"]["per_1000_state_transitions"] / 2000
    )


def test_cost_prints_each_item_and_the_total(everything, capsys):
    out = _text(capsys, "show", CLEAN, "--cost")
    assert "cost estimate (prices of 2025-01-15" in out
    for item in ("step functions transitions", "lambda compute", "lambda requests", "dynamodb writes", "dynamodb reads", "model input tokens"):
        assert item in out
    assert "$0.025 per 1,000 transitions" in out
    total = next(line for line in out.splitlines() if line.strip().startswith("total $"))
    assert float(total.split("$")[1].split()[0]) > 0


def test_cost_prices_the_model_wait_it_is_given(everything, capsys):
    """``--model-wait S``: each model call's ModelTurn Lambda waiting S seconds, at its memory."""
    prices = json.loads(PRICES.read_text())
    none = _json(capsys, "show", CLEAN, "--cost")
    five = _json(capsys, "show", CLEAN, "--cost", "--model-wait", "5")
    wait = five["model_wait"]
    assert wait["model_calls"] == none["usage"]["turns"] > 0
    expected = wait["model_calls"] * wait["memory_mb"] / 1024 * prices["lambda"]["per_gb_second"]
    assert wait["per_second"] == pytest.approx(expected) and wait["dollars"] == pytest.approx(5 * expected)
    assert none["model_wait"]["dollars"] == 0 and five["cost"] == none["cost"]  # the estimate itself is unchanged
    text = _text(capsys, "show", CLEAN, "--cost", "--model-wait", "5")
    assert "model wait: each second a model call takes adds" in text and "at 5 s per model call" in text
