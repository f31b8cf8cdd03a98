"""The fleet entries of the fault campaign (issue 27), on a stack with the test-only ``fleet`` agent
(``tests/fixtures/agents/fleet.py``): faults during a bulk operation, around a budget approval,
and while runs wait for and hold a concurrency slot (``slots``: ``bench/faults/fleet_slots.py``).

- ``bulk``: three runs fail on a bad deploy (each escalates; a human aborts it); after the fix, a
  bulk redrive selects them. Its operator crashes at each stage (``before``, ``before-start``,
  ``acted``) of each run, and is resumed until the operation is done; or a handler of the
  redriven runs crashes at each fault point. Same as the clean operation: every run SUCCEEDED
  with one new execution, and the same outcomes in the audit trail.
- ``budget``: a run with 400 tokens asks at half (before turn 2); an approver approves the ask
  through the approval service (as the API and pages do) as soon as it is listed, in the local
  dispatcher's hook after the invocation that listed it (so before the run's next check, with no
  clock held: a crash's retry backoff runs on the virtual clock); then the limit is 800, a second
  ask goes unanswered, and the run stops before turn 6. Crashes
  and zombies at each point of the turns around the ask, lost acknowledgements of the writes on
  the approvals table, skew, and an approver that dies between recording the decision and
  handing it to the ask. Same as the clean run: the stop, the turns, each ask's status and each
  request's status.

Duplicates are counted from the agent's own ledger (``fleet.EFFECTS``: each ``lookup`` attempt by
run and idempotency key): a key attempted again is a duplicate, unless the fault explains the one
retry, which a keyed remote applies once: a crash between that call's effect and its record
(``after_effect``), or a zombie that resumes before or after that effect (``RETRIED_BY_DESIGN``).
A second execution of a run by the operation, a second ask for one limit or a second request for
one ask count as duplicates too.
"""

from __future__ import annotations

import itertools
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

BULK_RUNS = 3
BULK_STAGES = ("before", "before-start", "acted")
BUDGET = {"tokens": 400, "ask_at": 0.5}
BUDGET_TURNS = (1, 2, 3)  # before, at and after the ask (before turn 2's model call)
# The faults whose run attempts one keyed call twice by design, answered by its key (a keyed remote
# applies it once): a crash between the effect and its record, and a zombie that resumes before or
# after the effect once another attempt has run it (docs/durability.md, the fault kinds' table).
RETRIED_BY_DESIGN = ("after_effect", "zombie.before_tool", "zombie.after_effect")
ENTRIES = ("bulk", "budget", "slots")


def bulk_cases() -> list[dict[str, Any]]:
    from longstep import faults

    out: list[dict[str, Any]] = [{"entry": "bulk", "crash": [stage, k]} for stage in BULK_STAGES for k in range(BULK_RUNS)]
    out += [{"entry": "bulk", "faults": [f"{p}@{t}"]} for p in faults.POINTS for t in (0, 1)]
    return out


def budget_cases() -> list[dict[str, Any]]:
    from longstep import faults

    out: list[dict[str, Any]] = [{"entry": "budget", "faults": [f"{p}@{t}"]} for t in BUDGET_TURNS for p in faults.POINTS]
    out += [{"entry": "budget", "faults": [f"zombie.{p}@2"]} for p in faults.POINTS]
    out += [{"entry": "budget", "faults": [f"lost_ack.{op}@{i}:approvals"]} for op in ("PutItem", "UpdateItem") for i in (0, 1, 2)]
    out += [{"entry": "budget", "faults": [f"skew.model_turn@{s}"]} for s in (-86_400, 3_600)]
    out += [{"entry": "budget", "approver_dies": True}]
    return out


def _scenario() -> Any:
    from longstep_kit.local.scenario import Scenario

    turns = {str(t): {"text": f"Turn {t}.", "tool_calls": [{"name": "lookup", "input": {"region": "us"}}]} for t in range(10)}
    turns["10"] = {"text": "All checked."}
    return Scenario.model_validate({"name": "budget", "input": {"goal": "Check every region.", "agent": "fleet", "max_turns": 20}, "turns": turns})


def ledger_duplicates(run_ids: set[str], case: dict[str, Any]) -> int:
    """Lookups attempted again under one key, less the one retry a crash after its effect explains."""
    from tests.fixtures.agents import fleet

    explained = {int(spec.rpartition("@")[2]) for spec in case.get("faults", []) if spec.rpartition("@")[0] in RETRIED_BY_DESIGN}
    extra = 0
    for (run_id, key), attempts in fleet.EFFECTS.items():
        if run_id in run_ids and attempts > 1:
            turn = int(key.split(":")[-2])
            extra += attempts - 1 - (1 if turn in explained else 0)
    return max(0, extra)


class _Crash(Exception):
    """The operator's process dies."""


class FleetCampaign:
    """One stack with the fleet agent; each case on a fresh world."""

    def __init__(self, stack: Any, case_timeout: float) -> None:
        from longstep.humans.table import ApprovalTable
        from longstep.store import CheckpointStore

        self.stack = stack
        self.timeout = case_timeout
        self.sfn = stack.client("stepfunctions")
        self.store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
        self.table = ApprovalTable(stack.outputs["ApprovalsTableName"], stack.client("dynamodb"))
        self.names = itertools.count()

    def run(self, case: dict[str, Any]) -> dict[str, Any]:
        from tests.fixtures.agents import fleet

        self.stack.reset_data()
        self.stack.clock.rewind()
        fleet.EFFECTS.clear()
        fleet.DEPLOY["broken"] = False
        return self._bulk(case) if case["entry"] == "bulk" else self._budget(case)

    # -- faults ---------------------------------------------------------------------------------

    def _injected(self, case: dict[str, Any], act: Callable[[], dict[str, Any]]) -> tuple[dict[str, Any], list[Any]]:
        from longstep.steps import RecordLease
        from longstep_kit.local.faults import FaultInjector, parse_fault

        injector = FaultInjector(
            plan=[parse_fault(s) for s in case.get("faults", [])],
            lock=RecordLease,
            dispatcher=self.stack.dispatcher,
            lambda_client=lambda: self.stack.client("lambda"),
        )
        injector.install()
        try:
            outcome = act()
        finally:
            injector.uninstall()
        return outcome, injector.injected

    # -- bulk -----------------------------------------------------------------------------------

    def _bulk(self, case: dict[str, Any]) -> dict[str, Any]:
        from longstep_kit.ops import runs as run_ops
        from longstep_kit.testing.wait import wait_execution
        from tests.fixtures.agents import fleet

        run_ids = self._failed_fleet()
        fleet.DEPLOY["broken"] = False  # the fix is deployed
        fired: list[Any] = []
        crash = case.get("crash")

        def fault(stage: str, run_id: str) -> None:
            if crash and [stage, run_ids.index(run_id)] == crash and not fired:
                fired.append({"stage": stage, "run": run_id})
                raise _Crash(f"{stage} {run_id}")

        before = {r: len(run_ops.run_executions(self.sfn, self.stack.state_machine_arn, r)) for r in run_ids}

        def act() -> dict[str, Any]:
            runner = self._runner(fault)
            try:
                runner.run("redrive", "status=failed", {})
            except _Crash:
                (op,) = [o for o in runner.audit.recent(self.stack.client("dynamodb")) if o["verb"] == "redrive"]
                runner.resume_operation(op["op_id"])
            (op,) = [o for o in runner.audit.recent(self.stack.client("dynamodb")) if o["verb"] == "redrive"]
            statuses = {}
            for run_id in run_ids:
                latest = run_ops.latest_execution(self.sfn, self.stack.state_machine_arn, run_id)
                statuses[run_id] = wait_execution(self.sfn, latest["executionArn"], timeout=self.timeout)["status"]
            outcomes = {r["run_id"]: r["outcome"] for r in runner.audit.runs(op["op_id"])}
            return {"statuses": statuses, "outcomes": outcomes}

        outcome, injected = self._injected(case, act)
        executions = {r: len(run_ops.run_executions(self.sfn, self.stack.state_machine_arn, r)) - before[r] for r in run_ids}
        duplicates = ledger_duplicates(set(run_ids), case) + sum(n - 1 for n in executions.values() if n > 1)
        ok = all(s == "SUCCEEDED" for s in outcome["statuses"].values()) and set(executions.values()) == {1}
        return {
            "fired": bool(fired or injected),
            "duplicates": duplicates,
            "status": "SUCCEEDED" if ok else json.dumps({"statuses": outcome["statuses"], "executions": executions}),
            "outcome": {"outcomes": sorted(outcome["outcomes"].values()), "executions": sorted(executions.values())},
        }

    def _failed_fleet(self) -> list[str]:
        """Three runs that the bad deploy failed (each escalated, and was aborted by a human)."""
        from longstep import keys
        from longstep.humans import escalations
        from longstep_kit.local.runner import start_input
        from longstep_kit.local.scenario import Scenario
        from longstep_kit.testing.wait import wait_execution, wait_until
        from tests.fixtures.agents import fleet

        fleet.DEPLOY["broken"] = True
        self.stack.clock.hold()  # the human aborts before time may skip the escalations' days
        arns = {}
        for _ in range(BULK_RUNS):
            run_id = f"bulk-{next(self.names)}"
            scenario = Scenario.model_validate(fleet.scenario(run_id, "eu", False))
            payload = {**start_input(self.stack, scenario, run_id), "tenant": "acme"}
            arns[run_id] = self.sfn.start_execution(stateMachineArn=self.stack.alias_arn, name=run_id, input=json.dumps(payload))["executionArn"]

        def parked() -> list:
            found = [(r, e) for r in arns for e in self.store.query_prefix(r, keys.ESCALATION_PREFIX)]
            shown = all((self.store.get(r, keys.RUN_INDEX_RECORD) or {}).get("status") == "escalated" for r in arns)
            return found if len(found) == len(arns) and shown else []

        try:
            for run_id, record in wait_until("the runs to escalate", parked, timeout=self.timeout):
                key = keys.parse(record["sk"])
                escalations.resolve(self.store, self.sfn, run_id, key.turn, key.call, escalations.Resolution(action="abort", resolver="campaign"))
        finally:
            self.stack.clock.release()
        for arn in arns.values():
            wait_execution(self.sfn, arn, timeout=self.timeout)
        return list(arns)

    def _runner(self, fault: Callable[[str, str], None]) -> Any:
        from longstep_kit.ops.bulk import BulkRunner, TokenBucket
        from longstep_kit.ops.fleet_query import RunsQuery

        query = RunsQuery(self.stack.client("dynamodb"), self.stack.outputs["CheckpointTableName"], self.sfn, self.stack.state_machine_arn)
        bucket = TokenBucket(rate=50, burst=10, now=lambda: 0.0, sleep=lambda s: None)
        return BulkRunner(self.store, self.sfn, self.stack.state_machine_arn, query, who="campaign", bucket=bucket, fault=fault)

    # -- budget ---------------------------------------------------------------------------------

    def _budget(self, case: dict[str, Any]) -> dict[str, Any]:
        from longstep import budget
        from longstep.humans import budget_asks
        from longstep.humans.requests import list_approvals
        from longstep.humans.table import STATUSES, Decision
        from longstep_kit.local.runner import start_input
        from longstep_kit.testing.wait import wait_execution
        from tests.fixtures.agents import fleet

        run_id = f"budget-{next(self.names)}"
        decision = Decision(decision="approve", approver="campaign")
        decided: list[str] = []

        def approver(invocation: Any) -> None:
            """Decides the first ask as soon as an invocation has listed it (before the run goes on)."""
            found = [] if decided else list_approvals(self.table, "pending", run_id)
            if not found:
                return
            decided.append(found[0]["approval_id"])
            if case.get("approver_dies"):  # recorded on the request, never handed to the ask
                self.table.record_decision(found[0]["approval_id"], decision)
            else:
                budget_asks.decide(self.table, self.store, found[0]["approval_id"], decision)

        def act() -> dict[str, Any]:
            payload = {**start_input(self.stack, _scenario(), run_id), "budget": BUDGET}
            self.stack.dispatcher.after_invoke.append(approver)
            try:
                arn = self.sfn.start_execution(stateMachineArn=self.stack.alias_arn, name=run_id, input=json.dumps(payload))["executionArn"]
                return json.loads(wait_execution(self.sfn, arn, timeout=self.timeout).get("output") or "{}")
            finally:
                self.stack.dispatcher.after_invoke.remove(approver)

        output, injected = self._injected(case, act)
        asks = budget.pending_asks(self.store, run_id)
        requests = [r for status in STATUSES for r in list_approvals(self.table, status, run_id)]
        by_ask = Counter(r["call"] for r in requests)
        duplicates = ledger_duplicates({run_id}, case) + sum(n - 1 for n in by_ask.values() if n > 1) + max(0, len(asks) - 2)
        outcome = {
            "stop": [output.get("status"), output.get("stop_reason"), output.get("turns")],
            "asks": [a.get("status") for a in asks],
            "requests": sorted(r["status"] for r in requests),
            "lookups": sorted(key.partition(":")[2] for run, key in fleet.EFFECTS if run == run_id),  # turn:call
        }
        return {
            "fired": bool(injected) or bool(case.get("approver_dies")),
            "duplicates": duplicates,
            "status": output.get("status"),
            "outcome": outcome,
        }


def run_fleet_campaign(progress: Path | None = None, case_timeout: float = 180.0, entries: tuple[str, ...] = ENTRIES) -> dict[str, Any]:
    """Every fleet case of ``entries`` (one process), compared with its entry's clean run: the
    bulk and budget entries on one stack, the slots entry on one whose deployment has a
    concurrency key (``bench/faults/fleet_slots.py``)."""
    from bench.faults.fleet_slots import FLEET_SETTINGS, SlotsCampaign, slot_cases
    from longstep_kit.local.stack import LocalStack
    from longstep_kit.project import agent_catalog

    agents = {**agent_catalog().references, "fleet": "tests.fixtures.agents.fleet:build"}
    rows: list[dict[str, Any]] = []
    clean: dict[str, Any] = {}
    started = time.perf_counter()
    shared = [e for e in entries if e in ("bulk", "budget")]
    if shared:
        with LocalStack(context={"longstep": {"agents": agents}}) as stack:
            campaign = FleetCampaign(stack, case_timeout)
            cases = [c for c in [*bulk_cases(), *budget_cases()] if c["entry"] in shared]
            clean.update(_run_cases(campaign.run, shared, cases, rows, progress))
    if "slots" in entries:
        with LocalStack(context={"longstep": {"agents": agents, "fleet": FLEET_SETTINGS}}) as stack:
            slots = SlotsCampaign(stack, case_timeout)

            def run(case: dict[str, Any]) -> dict[str, Any]:
                return slots.run(case, ledger_duplicates)

            clean.update(_run_cases(run, ["slots"], slot_cases(), rows, progress))
    return {"scenario": "fleet", "cases": rows, "seconds": round(time.perf_counter() - started, 1), "clean": clean}


def _run_cases(
    run: Callable[[dict[str, Any]], dict[str, Any]], entries: list[str], cases: list[dict[str, Any]], rows: list, progress: Path | None
) -> dict[str, Any]:
    """Each entry's clean run, then each case compared with its entry's; rows appended as known."""
    clean = {entry: run({"entry": entry}) for entry in entries}
    for case in cases:
        case_started = time.perf_counter()
        try:
            report = run(case)
        except Exception as exc:  # noqa: BLE001 - a case that cannot finish is a result, not the campaign's end
            row = {**case, "fired": None, "same_run": False, "duplicates": None, "error": f"{type(exc).__name__}: {exc}"[:300]}
        else:
            expected = clean[case["entry"]]
            same = report["status"] == expected["status"] and report["outcome"] == expected["outcome"]
            row = {**case, "fired": report["fired"], "same_run": same, "duplicates": report["duplicates"], "status": report["status"]}
            if not same:
                row["cause"] = json.dumps({"got": report["outcome"], "clean": expected["outcome"]})[:600]
        row["seconds"] = round(time.perf_counter() - case_started, 1)
        rows.append(row)
        if progress is not None:
            with progress.open("a") as out:
                out.write(json.dumps({"scenario": "fleet", **row}, default=str) + "\n")
    return clean
