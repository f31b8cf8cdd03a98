"""A fleet on the local stack: 18 runs of one agent across three tenants, a deploy that breaks
the lookup of one region, the runs index selecting exactly the runs that broke, and a bulk
redrive after the fix that replays each run against the fixed code first: the runs that called
the tool the fix removed are left alone, the others succeed, every effect happens once, and the
audit trail says what became of each. An interrupted bulk redrive is continued without a
second execution of any run."""

from __future__ import annotations

import json

import pytest

from longstep import keys
from longstep.humans import escalations
from longstep.store import CheckpointStore
from longstep_kit.cli import main
from longstep_kit.local.runner import start_input
from longstep_kit.local.scenario import Scenario
from longstep_kit.local.stack import LocalStack
from longstep_kit.ops import runs as run_ops
from longstep_kit.ops.bulk import BulkRunner, TokenBucket
from longstep_kit.ops.export import export_run
from longstep_kit.ops.fleet_query import RunsQuery
from longstep_kit.ops.replay import replay_export
from longstep_kit.testing.wait import wait_execution, wait_until
from tests.fixtures.agents import fleet
from tests.local.conftest import holds_released

TENANTS = ("acme", "globex", "initech")
RUNS = 18


def _region(i: int) -> str:
    return "eu" if i % 2 == 0 else "us"


def _legacy(i: int) -> bool:
    """The globex runs in eu also call the legacy export, which the fix removes."""
    return TENANTS[i % 3] == "globex" and _region(i) == "eu"


@pytest.fixture(scope="module")
def stack():
    from longstep_kit.project import agent_catalog

    context = {"longstep": {"agents": {**agent_catalog().references, "fleet": "tests.fixtures.agents.fleet:build"}}}
    with LocalStack(context=context) as local:
        yield local


@pytest.fixture(autouse=True)
def _no_hold_outlives_its_test(stack):
    with holds_released(stack.clock):
        yield


def _scenario(i: int) -> Scenario:
    return Scenario.model_validate(fleet.scenario(f"fleet-{i}", _region(i), _legacy(i)))


def _store(stack) -> CheckpointStore:
    return CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))


def _query(stack) -> RunsQuery:
    return RunsQuery(stack.client("dynamodb"), stack.outputs["CheckpointTableName"], stack.client("stepfunctions"), stack.state_machine_arn)


def _ids(runs) -> set[str]:
    return {r["run_id"] for r in runs}


@pytest.fixture(scope="module")
def fleet_after_bad_deploy(stack):
    """The runs on the broken deploy: the eu ones escalate, and a human aborts each."""
    sfn = stack.client("stepfunctions")
    fleet.DEPLOY["broken"] = True
    fleet.EFFECTS.clear()
    # The humans play their part before time may skip (else the escalations' 7 days pass at once).
    stack.clock.hold()
    arns = {}
    for i in range(RUNS):
        run_id = f"fleet-{i:02d}"
        payload = {**start_input(stack, _scenario(i), run_id), "tenant": TENANTS[i % 3], "tags": [f"region-{_region(i)}", "batch-7"]}
        arns[run_id] = sfn.start_execution(stateMachineArn=stack.alias_arn, name=run_id, input=json.dumps(payload))["executionArn"]
    store = _store(stack)
    broken = {f"fleet-{i:02d}" for i in range(RUNS) if _region(i) == "eu"}

    def parked() -> list:
        # A human hears of an escalation once Escalate has also moved the run's index record (its
        # notification goes out after that): answering on the park record alone raced that write.
        found = [(run_id, r) for run_id in sorted(broken) for r in store.query_prefix(run_id, keys.ESCALATION_PREFIX)]
        shown = all((store.get(run_id, keys.RUN_INDEX_RECORD) or {}).get("status") == "escalated" for run_id in broken)
        return found if len(found) == len(broken) and shown else []

    for run_id, record in wait_until("the eu runs to escalate", parked, timeout=60):
        key = keys.parse(record["sk"])
        escalations.resolve(store, sfn, run_id, key.turn, key.call, escalations.Resolution(action="abort", resolver="test"))
    stack.clock.release()
    ended = {run_id: wait_execution(sfn, arn)["status"] for run_id, arn in arns.items()}
    fleet.DEPLOY["broken"] = False  # the fix is deployed
    return broken, ended


def test_the_bad_deploy_failed_exactly_the_eu_runs(fleet_after_bad_deploy):
    broken, ended = fleet_after_bad_deploy
    assert {r for r, status in ended.items() if status == "FAILED"} == broken
    assert {r for r, status in ended.items() if status == "SUCCEEDED"} == set(ended) - broken


def test_the_runs_index_selects_exactly_the_right_runs(stack, fleet_after_bad_deploy):
    broken, _ = fleet_after_bad_deploy
    query = _query(stack)
    tenant = {f"fleet-{i:02d}": TENANTS[i % 3] for i in range(RUNS)}
    assert _ids(query.select("status=failed")) == broken
    assert _ids(query.select("status = FAILED and tenant = globex")) == {r for r in broken if tenant[r] == "globex"}
    assert _ids(query.select("error=ToolFailedError AND tenant in (acme, initech)")) == {r for r in broken if tenant[r] != "globex"}
    assert _ids(query.select("tag=region-us AND status=succeeded")) == set(tenant) - broken
    assert _ids(query.select("agent=fleet AND status!=failed")) == set(tenant) - broken
    # A scripted turn counts 150 tokens: the runs that finished had two, the broken ones one.
    assert _ids(query.select("tokens>=300")) == set(tenant) - broken
    assert _ids(query.select("tokens=150 AND age<1h")) == broken
    assert query.select("tenant=umbrella") == []


def test_pages_of_a_query_are_disjoint_and_complete(stack, fleet_after_bad_deploy):
    query = _query(stack)
    seen: list[str] = []
    page = query.page("tag=batch-7", limit=5)
    seen += [r["run_id"] for r in page.runs]
    while page.cursor:
        page = query.page("tag=batch-7", limit=5, cursor=page.cursor)
        assert len(page.runs) <= 5
        seen += [r["run_id"] for r in page.runs]
    assert len(seen) == len(set(seen)) == RUNS


def test_runs_where_on_the_command_line(stack, fleet_after_bad_deploy, capsys):
    broken, _ = fleet_after_bad_deploy
    target = ["--stack", stack.assembly.stack_name, "--region", "us-east-1"]
    assert main(["runs", "--where", "status=failed AND tenant=acme", "--output", "json", *target]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert {r["run_id"] for r in shown["runs"]} == {r for r in broken if int(r[-2:]) % 3 == 0}
    assert all(r["tenant"] == "acme" and r["error"] == "ToolFailedError" for r in shown["runs"])
    assert main(["runs", "--where", "status=failed AND tenant=acme", "--limit", "2", *target]) == 0
    out = capsys.readouterr().out
    assert out.count("ToolFailedError") == 2 and "2 runs where status=failed AND tenant=acme" in out and "more: --cursor " in out
    assert main(["runs", "--where", "tenat=acme", *target]) == 2
    err = capsys.readouterr().err
    assert "unknown field 'tenat'" in err and err.count("\n") == 1


def _gate(stack):
    from longstep.artifacts import ArtifactStore

    artifacts = ArtifactStore(stack.outputs["ArtifactBucketName"], stack.client("s3"))
    return lambda run_id: replay_export(export_run(_store(stack), artifacts, run_id), lambda name: fleet.fixed(), unfinished=True).divergences


def _runner(stack, **kwargs) -> BulkRunner:
    sleeps: list[float] = []
    bucket = TokenBucket(rate=50, burst=2, now=lambda: 0.0, sleep=sleeps.append)
    return BulkRunner(_store(stack), stack.client("stepfunctions"), stack.state_machine_arn, _query(stack), who="test", bucket=bucket, **kwargs)


def test_a_bulk_redrive_skips_the_runs_that_diverge_and_brings_the_rest_to_succeeded(stack, fleet_after_bad_deploy, capsys):
    broken, _ = fleet_after_bad_deploy
    divergent = {r for r in broken if _legacy(int(r[-2:]))}
    target = ["--stack", stack.assembly.stack_name, "--region", "us-east-1"]
    assert main(["bulk", "redrive", "--where", "status=failed", "--dry-run", "--output", "json", *target]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert dry["count"] == len(broken) and set(dry["runs"]) == broken
    assert main(["redrive", "--where", "status=failed", "--dry-run", "--output", "json", *target]) == 0  # the verb's own form
    assert json.loads(capsys.readouterr().out) == dry
    assert _ids(_query(stack).select("status=failed")) == broken  # a dry run changes nothing

    runner = _runner(stack, replay_gate=_gate(stack))
    op_id = runner.run("redrive", "status=failed", {})
    sfn = stack.client("stepfunctions")
    for run_id in broken - divergent:
        latest = run_ops.latest_execution(sfn, stack.state_machine_arn, run_id)
        assert wait_execution(sfn, latest["executionArn"])["status"] == "SUCCEEDED"
    outcomes = {r["run_id"]: r["outcome"] for r in runner.audit.runs(op_id)}
    assert {r for r, o in outcomes.items() if o == "diverged"} == divergent
    assert {r for r, o in outcomes.items() if o == "resumed"} == broken - divergent
    assert all("legacy_export" in str(r.get("detail")) for r in runner.audit.runs(op_id) if r["outcome"] == "diverged")
    assert runner.bucket.waited > 0  # 9 runs through a bucket of 2: the rate held them back
    # Every lookup happened once per call: the redriven runs replayed, never redid, what was recorded.
    assert fleet.EFFECTS and max(fleet.EFFECTS.values()) == 1
    assert _ids(_query(stack).select("status=failed")) == divergent

    assert main(["audit", op_id, "--output", "json", *target]) == 0
    audit = json.loads(capsys.readouterr().out)
    assert audit["verb"] == "redrive" and audit["where"] == "status=failed" and audit["who"] == "test" and audit["status"] == "done"
    assert {r["run_id"]: r["outcome"] for r in audit["runs"]} == outcomes
    assert main(["audit", *target]) == 0
    listed = capsys.readouterr().out
    assert op_id in listed and "redrive" in listed and "status=failed" in listed


class Crash(Exception):
    """The operator's process dies."""


def test_an_interrupted_bulk_redrive_is_continued_without_a_second_execution(stack, fleet_after_bad_deploy):
    broken, _ = fleet_after_bad_deploy
    divergent = sorted(r for r in broken if _legacy(int(r[-2:])))
    sfn = stack.client("stepfunctions")
    before = {r: len(run_ops.run_executions(sfn, stack.state_machine_arn, r)) for r in divergent}
    crashes = {"acted": divergent[1], "before-start": divergent[2]}

    def fault(stage: str, run_id: str) -> None:
        if crashes.get(stage) == run_id:
            del crashes[stage]
            raise Crash(f"{stage} {run_id}")

    runner = _runner(stack, fault=fault)
    with pytest.raises(Crash):
        runner.run("redrive", "status=failed AND tenant=globex", {"force": True})
    (op,) = [o for o in runner.audit.recent(stack.client("dynamodb")) if o["where"] == "status=failed AND tenant=globex"]
    with pytest.raises(Crash):
        runner.resume_operation(op["op_id"])
    counts = runner.resume_operation(op["op_id"])
    assert counts == {"resumed": len(divergent)}
    for run_id in divergent:
        executions = run_ops.run_executions(sfn, stack.state_machine_arn, run_id)
        assert len(executions) == before[run_id] + 1, run_id  # one new execution each, crash or not
        assert wait_execution(sfn, executions[-1]["executionArn"])["status"] == "SUCCEEDED"
    assert max(fleet.EFFECTS.values()) == 1


def _budget_scenario() -> Scenario:
    """Ten turns of 150 tokens; turn 2 waits for the event ``go`` (the human answers the ask then)."""
    turns = {str(t): {"text": f"Turn {t}.", "tool_calls": [{"name": "lookup", "input": {"region": "us"}}]} for t in range(10)}
    turns["2"] = {"text": "Waiting for the go.", "tool_calls": [{"name": "wait_for", "input": {"event": "go", "timeout_seconds": 600}}]}
    turns["10"] = {"text": "All checked."}
    return Scenario.model_validate({"name": "budget", "input": {"goal": "Check every region.", "agent": "fleet", "max_turns": 20}, "turns": turns})


def test_a_budget_asks_is_allowed_once_then_stops_the_run_at_the_new_limit(stack, fleet_after_bad_deploy, capsys):
    from longstep import budget
    from longstep.humans import signals
    from longstep_kit.project import agent_catalog

    sfn, store = stack.client("stepfunctions"), _store(stack)
    target = ["--stack", stack.assembly.stack_name, "--region", "us-east-1"]
    payload = {**start_input(stack, _budget_scenario(), "budget-1"), "tenant": "acme", "budget": {"tokens": 400, "ask_at": 0.5}}
    stack.clock.hold()  # the human is about to act: the wait's timeout does not fire meanwhile
    arn = sfn.start_execution(stateMachineArn=stack.alias_arn, name="budget-1", input=json.dumps(payload))["executionArn"]
    # Before turn 2's model call the run has spent 300 of its 400 tokens: past half, it asks.
    (ask,) = wait_until("the run to ask", lambda: budget.pending_asks(store, "budget-1"), timeout=30)
    assert ask["status"] == "pending" and ask["question"] == "run budget-1 has spent 300 tokens of its 400 tokens; allow 400 tokens more?"
    from longstep.events import EventLog

    # The ask's record is written before the invocation's events are appended: wait for the event.
    asked = wait_until("the ask's event", lambda: [e for e in EventLog(store).read("budget-1") if e["type"] == budget.ASKED_EVENT], timeout=30)
    assert [(e["turn"], e["question"]) for e in asked] == [(2, ask["question"])]  # in the run's event stream, once
    assert main(["budget", "allow", "budget-1", "--output", "json", *target]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "allowed"
    assert main(["budget", "allow", "budget-1", *target]) == 2  # answered once: nothing is pending now
    assert "no pending budget ask" in capsys.readouterr().err
    catalog = agent_catalog()
    resolve = lambda name: fleet.build() if name == "fleet" else catalog(name)  # noqa: E731
    wait_until("the wait", lambda: any(r.get("status") == "waiting" for r in store.query_prefix("budget-1", keys.SIGNAL_PREFIX)), timeout=30)
    signals.send(store, sfn, "budget-1", "go", {}, resolve)
    stack.clock.release()
    ended = wait_execution(sfn, arn)
    output = json.loads(ended["output"])
    # The new limit is 800: a second ask at 450 goes unanswered, and before turn 6 (900 spent) the run stops.
    assert (output["status"], output["stop_reason"], output["turns"]) == ("STOPPED", "budget", 6)
    asks = budget.pending_asks(store, "budget-1")
    assert [a["status"] for a in asks] == ["allowed", "pending"] and asks[1]["limit"] == 800
    spent = budget.spend(store.steps("budget-1"), None)["tokens"]
    assert spent == 900 and len([s for s in store.steps("budget-1") if s.kind == "model"]) == 6  # counted from the records
    (stopped,) = _query(stack).select("status=stopped AND tenant=acme")
    assert stopped["run_id"] == "budget-1" and stopped["error"] == "budget"


def test_a_tenant_budget_is_shared_by_its_runs(stack, fleet_after_bad_deploy, capsys):
    from longstep import budget

    sfn, store = stack.client("stepfunctions"), _store(stack)
    target = ["--stack", stack.assembly.stack_name, "--region", "us-east-1"]
    assert main(["budget", "tenant", "umbrella", "--tokens", "1000", *target]) == 0
    capsys.readouterr()
    arns = []
    stack.clock.hold()
    for n in range(3):
        payload = {**start_input(stack, _budget_scenario(), f"tenant-{n}"), "tenant": "umbrella"}
        arns.append(sfn.start_execution(stateMachineArn=stack.alias_arn, name=f"tenant-{n}", input=json.dumps(payload))["executionArn"])
    for n in range(3):  # each parks at turn 2's wait; then all go on together
        wait_until("the wait", lambda: any(r.get("status") == "waiting" for r in store.query_prefix(f"tenant-{n}", keys.SIGNAL_PREFIX)), timeout=30)
    from longstep.humans import signals

    for n in range(3):
        signals.send(store, sfn, f"tenant-{n}", "go", {}, lambda name: fleet.build())
    stack.clock.release()
    outputs = [json.loads(wait_execution(sfn, arn)["output"]) for arn in arns]
    assert all(o["status"] == "STOPPED" and o["stop_reason"] == "budget" for o in outputs)
    spent = sum(budget.spend(store.steps(f"tenant-{n}"), None)["tokens"] for n in range(3))
    # Each run stops at its first check at or past the shared 1,000 tokens: at most one turn each over it.
    assert 1000 <= spent <= 1000 + 3 * 150
    assert budget.tenant_spend(store, "umbrella")["tokens"] >= 1000


def test_crashes_around_a_budget_ask_ask_once_and_repeat_no_effect(stack, fleet_after_bad_deploy):
    """The crash campaign's budget entry: crashes right after the ask is recorded (before the model
    call), after a reply is recorded and after a lookup's effect; the run still asks once, stops
    at its limit unanswered, and no step was repeated but the one whose effect had no record yet."""
    from longstep import budget
    from longstep.steps import RecordLease
    from longstep_kit.local.faults import Fault, FaultInjector

    sfn, store = stack.client("stepfunctions"), _store(stack)
    turns = {str(t): {"text": f"Turn {t}.", "tool_calls": [{"name": "lookup", "input": {"region": "us"}}]} for t in range(8)}
    scenario = Scenario.model_validate({"name": "budget-crash", "input": {"goal": "Check.", "agent": "fleet", "max_turns": 20}, "turns": turns})
    plan = [Fault("after_model", 0), Fault("after_effect", 1), Fault("before_model", 2), Fault("after_record", 2)]
    injector = FaultInjector(plan=plan, lock=RecordLease)
    fleet.EFFECTS.clear()
    injector.install()
    try:
        payload = {**start_input(stack, scenario, "budget-crash"), "budget": {"tokens": 400, "ask_at": 0.5}}
        arn = sfn.start_execution(stateMachineArn=stack.alias_arn, name="budget-crash", input=json.dumps(payload))["executionArn"]
        output = json.loads(wait_execution(sfn, arn)["output"])
    finally:
        injector.uninstall()
    assert len(injector.injected) == len(plan)
    assert (output["status"], output["stop_reason"], output["turns"]) == ("STOPPED", "budget", 3)
    assert [a["status"] for a in budget.pending_asks(store, "budget-crash")] == ["pending"]
    attempts = {key[1]: n for key, n in fleet.EFFECTS.items() if key[0] == "budget-crash"}
    assert set(attempts) == {"budget-crash:0:0", "budget-crash:1:0", "budget-crash:2:0"}  # one keyed effect per call
    # Only the crash right after turn 1's effect ran it again, under the same key (the keyed
    # remote applies it once); the crashes around the ask and the replies repeated nothing.
    assert (attempts["budget-crash:0:0"], attempts["budget-crash:1:0"], attempts["budget-crash:2:0"]) == (1, 2, 1)


def test_bulk_stop_and_bulk_signal_act_on_exactly_their_selection(stack, fleet_after_bad_deploy, capsys):
    from longstep.humans import signals

    sfn, store = stack.client("stepfunctions"), _store(stack)
    target = ["--stack", stack.assembly.stack_name, "--region", "us-east-1"]
    names = {"wait-stop-0": "stopme", "wait-stop-1": "stopme", "wait-sig-0": "sigme", "wait-sig-1": "sigme"}
    stack.clock.hold()
    arns = {}
    for run_id, tag in names.items():
        payload = {**start_input(stack, _budget_scenario(), run_id), "tenant": "hooli", "tags": [tag]}
        arns[run_id] = sfn.start_execution(stateMachineArn=stack.alias_arn, name=run_id, input=json.dumps(payload))["executionArn"]
    for run_id in names:
        wait_until("the wait", lambda: any(r.get("status") == "waiting" for r in store.query_prefix(run_id, keys.SIGNAL_PREFIX)), timeout=30)
    # The single-run verbs take a selection too: the same bulk operation (rate, audit, resumable).
    assert main(["signal", "go", "--where", "tag=sigme", "--dry-run", "--output", "json", *target]) == 0
    assert set(json.loads(capsys.readouterr().out)["runs"]) == {"wait-sig-0", "wait-sig-1"}
    # Parked on their waits: waiting_for_event, as `runs` says (not running).
    assert main(["stop", "--where", "tag=stopme AND status=waiting_for_event", "--reason", "offboarded", "--output", "json", *target]) == 0
    assert json.loads(capsys.readouterr().out)["counts"] == {"stopped": 2}
    runner = _runner(stack, send_signal=lambda run_id, event, payload: signals.send(store, sfn, run_id, event, payload, lambda name: fleet.build()))
    op_id = runner.run("signal", "tag=sigme", {"event": "go", "payload": {"by": "ops"}})
    assert {r["run_id"]: r["outcome"] for r in runner.audit.runs(op_id)} == {"wait-sig-0": "delivered", "wait-sig-1": "delivered"}
    stack.clock.release()
    outputs = {run_id: json.loads(wait_execution(sfn, arn)["output"]) for run_id, arn in arns.items()}
    assert {r: (o["status"], o.get("stop_reason")) for r, o in outputs.items()} == {
        "wait-stop-0": ("STOPPED", "offboarded"),
        "wait-stop-1": ("STOPPED", "offboarded"),
        "wait-sig-0": ("SUCCEEDED", None),
        "wait-sig-1": ("SUCCEEDED", None),
    }
    # A second stop of the same selection finds nothing running: each run is skipped, and says why.
    assert main(["bulk", "stop", "--where", "tag=stopme", "--dry-run", *target]) == 0
    out = capsys.readouterr().out
    assert "would act on 0 runs (2 skipped)" in out and "it is stopped: nothing to stop" in out
    assert main(["resume", "--where", "tag=stopme", "--dry-run", *target]) == 0
    assert "would act on 2 runs" in capsys.readouterr().out  # stopped runs: resume would take them
    assert main(["stop", "wait-stop-0", "--where", "tag=stopme", *target]) == 2
    assert "give a run id or --where, not both" in capsys.readouterr().err


def test_a_budget_ask_of_a_run_stopped_meanwhile_leaves_the_inbox(stack):
    from longstep.humans.requests import list_approvals
    from longstep.humans.table import ApprovalTable

    sfn = stack.client("stepfunctions")
    store, table = _store(stack), ApprovalTable(stack.outputs["ApprovalsTableName"], stack.client("dynamodb"))
    target = ["--stack", stack.assembly.stack_name, "--region", "us-east-1"]
    payload = {**start_input(stack, _budget_scenario(), "budget-stop"), "budget": {"tokens": 400, "ask_at": 0.5}}
    stack.clock.hold()  # the human stops the run before the wait's timeout may fire
    try:
        arn = sfn.start_execution(stateMachineArn=stack.alias_arn, name="budget-stop", input=json.dumps(payload))["executionArn"]
        (request,) = wait_until("the ask in the inbox", lambda: list_approvals(table, "pending", "budget-stop"), timeout=30)
        wait_until("the wait", lambda: any(r.get("status") == "waiting" for r in store.query_prefix("budget-stop", keys.SIGNAL_PREFIX)), timeout=30)
        assert main(["stop", "budget-stop", *target]) == 0
    finally:
        stack.clock.release()
    assert json.loads(wait_execution(sfn, arn)["output"])["status"] == "STOPPED"
    # The run ended with its ask unanswered: Finish closed it, the inbox no longer lists it.
    assert list_approvals(table, "pending", "budget-stop") == []
    assert table.get(request["approval_id"])["status"] == "expired"
