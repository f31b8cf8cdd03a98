"""``RunInspector``: the runs of one deployment, where each stands, and one run's whole view."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from longstep import clock
from longstep import keys, run_status
from longstep.contract import migrations
from longstep.humans import requests as approval_requests
from longstep.humans.table import ApprovalTable
from longstep.store import CheckpointStore
from longstep_kit.ops.views import InspectError, running, tree
from longstep_kit.ops.views.history import Attempt, Execution, attempts_of, execution_history, execution_of, run_id_of
from longstep_kit.ops.views.records import item_bytes, json_value, plain
from longstep_kit.ops.views.status import ESCALATED, FAILED, PAUSED, RUNNING, STATUSES, STOPPED, SUCCEEDED, WAITING_STATUSES, RunState
from longstep_kit.ops.views.timeline import TimelineEntry, build_timeline, is_effect
from longstep_kit.ops.views.usage import Usage, count_usage


@dataclass
class RunView:
    """Everything ``longstep show`` prints about one run.

    Attributes:
        state: where the run stands.
        run: the run record (agent, goal, model, max_turns, created_at, code_version, code_parts, forked_from), or {} when expired.
        executions: the run's executions, oldest first.
        timeline: recorded steps and waits, in time order.
        last_model: the latest model step.
        last_effect: the latest tool step with an external effect (effect class other than
            ``read``; without effect classes, a tool that wrote an intent marker or needed approval).
        usage: what the run used.
        attempts: every invocation in the histories.
        notes: caveats of the view (effect classes unknown, a history that has expired).
    """

    state: RunState
    run: dict[str, Any]
    executions: list[Execution]
    timeline: list[TimelineEntry]
    last_model: TimelineEntry | None
    last_effect: TimelineEntry | None
    usage: Usage
    attempts: list[Attempt] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class RunInspector:
    """Reads the state, timeline and usage of runs of one deployment.

    Args:
        state_machine_arn: the agent state machine.
        checkpoint_table: the checkpoint table's name.
        approvals_table: the approvals table's name (None: approvals are not looked at).
        sfn: a Step Functions client (created on first use when omitted).
        dynamodb: a DynamoDB client (created on first use when omitted).
        lambda_client: a Lambda client, used only for the functions' memory sizes (cost).
    """

    def __init__(
        self,
        state_machine_arn: str,
        checkpoint_table: str,
        approvals_table: str | None = None,
        *,
        sfn: Any = None,
        dynamodb: Any = None,
        lambda_client: Any = None,
    ) -> None:
        self.state_machine_arn = state_machine_arn
        self.checkpoint_table = checkpoint_table
        self.approvals_table = approvals_table
        self._sfn = sfn
        self._dynamodb = dynamodb
        self._lambda = lambda_client
        self._memory: dict[str, int] = {}

    # clients, created lazily ---------------------------------------------------------------

    @property
    def sfn(self) -> Any:
        if self._sfn is None:
            import boto3

            self._sfn = boto3.client("stepfunctions")
        return self._sfn

    @property
    def dynamodb(self) -> Any:
        if self._dynamodb is None:
            import boto3

            self._dynamodb = boto3.client("dynamodb")
        return self._dynamodb

    @property
    def lambda_client(self) -> Any:
        if self._lambda is None:
            import boto3

            self._lambda = boto3.client("lambda")
        return self._lambda

    @property
    def store(self) -> CheckpointStore:
        return CheckpointStore(self.checkpoint_table, self.dynamodb)

    @property
    def approvals(self) -> Any:
        """The approvals table (``longstep.humans.table.ApprovalTable``), or None."""
        if self.approvals_table is None:
            return None
        return ApprovalTable(self.approvals_table, self.dynamodb)

    def pending_approvals(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """Approval requests waiting for a decision (a run's, or every run's), oldest first."""
        if self.approvals is None:
            return []
        found = approval_requests.pending_approvals(self.approvals, run_id)
        return sorted(found, key=lambda v: v.get("requested_at") or "")

    # executions ------------------------------------------------------------------------------

    def executions(self, status: str | None = None) -> list[Execution]:
        """Every execution of the state machine (only those in ``status`` when given), oldest first."""
        found = []
        kwargs: dict[str, Any] = {"stateMachineArn": self.state_machine_arn, "maxResults": 1000}
        if status:
            kwargs["statusFilter"] = status
        while True:
            page = self.sfn.list_executions(**kwargs)
            found.extend(execution_of(e) for e in page["executions"])
            if not page.get("nextToken"):
                break
            kwargs["nextToken"] = page["nextToken"]
        return sorted(found, key=lambda e: e.started)

    def run_executions(self, run_id: str) -> list[Execution]:
        """The executions of one run, oldest first (by generation: see :func:`~longstep_kit.ops.runs.generation_of`)."""
        from longstep_kit.ops.runs import generation_of

        return sorted((e for e in self.executions() if run_id_of(e.name) == run_id), key=lambda e: (generation_of(e.name), e.started))

    # states ----------------------------------------------------------------------------------

    def runs(self, status: str | None = None, *, running_only: bool = False) -> list[RunState]:
        """Every run of the state machine with its status, most recently started first.

        Args:
            status: keep only runs in this status (one of :data:`STATUSES`).
            running_only: only runs whose latest execution is running.
        """
        if status is not None and status not in STATUSES:
            raise InspectError(f"status: {status!r} is not one of {', '.join(STATUSES)}")
        # A running execution is always its run's latest (a run is resumed only once stopped), so
        # the statuses a running execution can have need only the running executions.
        only_running = running_only or status in (RUNNING, *WAITING_STATUSES)
        groups: dict[str, list[Execution]] = {}
        for execution in self.executions("RUNNING" if only_running else None):
            groups.setdefault(run_id_of(execution.name), []).append(execution)
        by_run: dict[str, list[dict[str, Any]]] = {}
        if any(execs[-1].status == "RUNNING" for execs in groups.values()):
            for request in self.pending_approvals():  # one query for every run
                by_run.setdefault(request["run_id"], []).append(request)
        states = [self._state(run_id, execs, by_run.get(run_id, []), groups) for run_id, execs in groups.items()]
        if status is not None:
            states = [s for s in states if s.status == status]
        return sorted(states, key=lambda s: s.execution.started if s.execution else s.since, reverse=True)

    def stuck(self, older_than: float, now: float | None = None) -> list[RunState]:
        """Runs that have waited for a human or an event for at least ``older_than`` seconds,
        longest first."""
        now = clock.now() if now is None else now
        waiting = [s for s in self.runs(None, running_only=True) if s.status in WAITING_STATUSES]
        return sorted((s for s in waiting if s.age(now) >= older_than), key=lambda s: s.since)

    def state(self, run_id: str) -> RunState:
        """Where one run stands.

        Raises:
            InspectError: the run has neither an execution nor a record.
        """
        executions = self.run_executions(run_id)
        if not executions and self.store.get(run_id, keys.RUN_RECORD) is None:
            raise InspectError(f"run_id: no run named {run_id!r} on {self.state_machine_arn}")
        return self._state(run_id, executions)

    def _state(
        self,
        run_id: str,
        executions: list[Execution],
        approvals: list[dict[str, Any]] | None = None,
        groups: dict[str, list[Execution]] | None = None,
    ) -> RunState:
        """Where a run stands, from its executions (``groups``: every run's, when the caller has listed them)."""
        if not executions:
            final = self.store.get(run_id, keys.FINAL_RECORD)
            if final is not None:
                status = run_status.of_ended("SUCCEEDED", json_value(final.get("output")))
                reason = run_status.stop_reason(json_value(final.get("output")))
                return RunState(run_id, status, float(final.get("finished_at", 0)), "execution history expired", None, 0, reason)
            return RunState(run_id, FAILED, 0.0, "no execution found (history expired?)", None, 0)
        last = executions[-1]
        count = len(executions)
        if last.status == "SUCCEEDED":
            final = self.store.get(run_id, keys.FINAL_RECORD) or {}
            output = json_value(final.get("output"))
            reason = run_status.stop_reason(output)
            if reason is not None:
                return RunState(run_id, STOPPED, last.stopped or last.started, f"{reason} (execution {last.name})", last, count, reason)
            stop = output.get("stop") if isinstance(output, dict) else None
            detail = f"execution {last.name}" + (" (stopped at max_turns: the agent did not finish)" if stop == "max_turns" else "")
            return RunState(run_id, SUCCEEDED, last.stopped or last.started, detail, last, count, stop if stop == "max_turns" else None)
        if last.status != "RUNNING":
            detail, error = self._failure(last)
            return RunState(run_id, run_status.of_ended(last.status), last.stopped or last.started, detail, last, count, error)
        status, since, detail, reason = self.open_state(run_id, last, approvals, groups)
        return RunState(run_id, status, since, detail, last, count, reason)

    def open_state(
        self,
        run_id: str,
        execution: Execution | None = None,
        approvals: list[dict[str, Any]] | None = None,
        groups: dict[str, list[Execution]] | None = None,
    ) -> tuple[str, float, str, str | None]:
        """Where a run whose latest execution runs stands: ``(status, since, detail, reason)``.

        Paused (its run record holds the Pause state's token), else what it waits for
        (``running.waiting_on``), else running (on its subagent runs, or its latest step).

        Args:
            run_id: the run.
            execution: its running execution (None: not looked up; ``since`` is then the record's).
            approvals: the run's pending approval requests, when the caller has read them already.
            groups: every run's executions, when the caller has listed them.
        """
        record = self.store.get(run_id, keys.RUN_RECORD) or {}
        started = execution.started if execution is not None else float(record.get("created_at") or 0)
        if run_status.is_paused(record):
            since, by = self._paused(run_id, started)
            return PAUSED, since, "paused at a model turn: `longstep resume` continues it", by
        waiting = self.waiting_on(run_id, approvals)
        if waiting is not None:
            status, since, detail = waiting
            return status, since, detail, detail.split(": ", 1)[1][:200] if status == ESCALATED and ": " in detail else None
        on_children = tree.waiting_on_children(self.store, run_id, lambda child: self._child_state(child, groups))
        if on_children is not None:  # parked on its subagent runs: say what they wait for
            since, detail, _ = on_children
            return RUNNING, since, detail[:300], None
        if execution is None:
            return RUNNING, started, "running", None
        return RUNNING, started, running.progress(self.dynamodb, self.checkpoint_table, run_id, execution), None

    def _paused(self, run_id: str, started: float) -> tuple[float, str | None]:
        """When a paused run parked (its ``run.paused`` event) and who asked (``pause.requested``'s ``by``)."""
        from longstep import events

        recent = events.EventLog(self.store).recent(run_id, 8)
        paused = [e for e in recent if e.get("type") == events.RUN_PAUSED]
        asked = [e for e in recent if e.get("type") == "pause.requested" and e.get("by")]
        since = float(paused[-1].get("at") or started) if paused else started
        return since, (f"paused by {asked[-1]['by']}" if asked else None)

    def _child_state(self, run_id: str, groups: dict[str, list[Execution]] | None) -> RunState | None:
        executions = groups.get(run_id, []) if groups is not None else self.run_executions(run_id)
        return self._state(run_id, executions, None, groups) if executions else None

    def children(self, run_id: str) -> list[tuple[int, tree.ChildRun, RunState | None]]:
        """The runs below ``run_id`` (depth first, with depth) and where each stands."""
        groups: dict[str, list[Execution]] = {}
        for execution in self.executions():  # one listing for the whole tree
            groups.setdefault(run_id_of(execution.name), []).append(execution)
        return [(depth, child, self._child_state(child.run_id, groups)) for depth, child in tree.descendants(self.store, run_id)]

    def _failure(self, execution: Execution) -> tuple[str, str | None]:
        """What an ended execution's failure says: ``(detail, error name)``."""
        try:
            desc = self.sfn.describe_execution(executionArn=execution.arn)
        except Exception:  # noqa: BLE001 - a detail, never worth failing the listing for
            return execution.status, None
        error, cause = desc.get("error"), desc.get("cause")
        message = (json_value(cause) or {}).get("errorMessage") if isinstance(json_value(cause), dict) else cause
        parts = [execution.status] + [p for p in (error, message) if p]
        return ": ".join(str(p) for p in parts)[:300], error

    def waiting_on(self, run_id: str, approvals: list[dict[str, Any]] | None = None) -> tuple[str, float, str] | None:
        """What a running run waits for, from its parked records: ``(status, since, detail)``
        (``running.waiting_on``). None when it waits for nothing.

        Args:
            run_id: the run.
            approvals: the run's pending approval requests, when the caller has read them already.
        """

        def pending() -> list[dict[str, Any]]:
            return self.pending_approvals(run_id) if approvals is None else approvals

        return running.waiting_on(self.store, self.dynamodb, self.checkpoint_table, run_id, pending)

    # the timeline ----------------------------------------------------------------------------

    def view(self, run_id: str, *, effects: Mapping[str, str] | None = None, memory: bool = False, now: float | None = None) -> RunView:
        """A run's state, timeline, last model call and last side effect, and usage.

        Args:
            run_id: the run.
            effects: tool name -> effect class (``read``, ``keyed``...), to tell side effects from
                reads; without it, a tool counts as a side effect when it wrote an intent marker
                (at-most-once) or needed an approval.
            memory: look up each function's memory (Lambda ``GetFunctionConfiguration``) to
                count GB-seconds; without it, ``lambda_gb_seconds`` stays 0.
            now: the current time (epoch seconds) for waits still open.

        Raises:
            InspectError: no such run.
        """
        now = clock.now() if now is None else now
        executions = self.run_executions(run_id)
        raw = self._records(run_id)
        if not executions and not raw:
            raise InspectError(f"run_id: no run named {run_id!r} on {self.state_machine_arn}")
        state = self._state(run_id, executions)
        attempts: list[Attempt] = []
        transitions = 0
        for execution in executions:
            events = self._history(execution.arn)
            transitions += sum(1 for e in events if e["type"].endswith("StateEntered"))
            attempts.extend(attempts_of(events, execution.name))
        sizes = {item["sk"]["S"]: item_bytes(item) for item in raw}
        records = {item["sk"]["S"]: plain(item) for item in raw}
        steps = {step.sk: step.result for step in self.store.steps(run_id)}
        requests = approval_requests.run_approvals(self.approvals, self.store, run_id) if self.approvals is not None else []
        run_record = migrations.upgrade(dict(records[keys.RUN_RECORD])) if keys.RUN_RECORD in records else {}
        shown = ("agent", "goal", "model", "max_turns", "created_at", "code_version", "code_parts", keys.FORKED_FROM)
        run = {k: v for k, v in run_record.items() if k in shown}
        for name in ("model", "code_parts", keys.FORKED_FROM):
            if isinstance(run.get(name), str):
                run[name] = json_value(run[name])
        notes = []
        if effects is None:
            notes.append("effect classes unknown: side effects are the tools that wrote an intent marker or needed an approval")
        if not executions:
            notes.append("no execution found: the history has expired; durations and retries are unknown")
        if self.approvals is None and any(sk.startswith("approval#") for sk in records):
            notes.append("approvals table not given: approval requests are not shown")
        timeline = build_timeline(records, sizes, steps, attempts, requests, effects, now)
        usage = count_usage(records, sizes, steps, attempts, requests, transitions, len(executions), self.memory_mb if memory else None)
        models = [e for e in timeline if e.kind == "model"]
        effects_seen = [e for e in timeline if e.kind == "tool" and is_effect(e, records)]
        return RunView(
            state=state,
            run=run,
            executions=executions,
            timeline=timeline,
            last_model=max(models, key=lambda e: (e.at, e.turn)) if models else None,
            last_effect=max(effects_seen, key=lambda e: (e.at, e.turn, e.call or 0)) if effects_seen else None,
            usage=usage,
            attempts=attempts,
            notes=notes,
        )

    def _records(self, run_id: str) -> list[dict[str, Any]]:
        """Every item of the run's partition, typed (sizes are computed on these)."""
        items: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {
            "TableName": self.checkpoint_table,
            "KeyConditionExpression": "#pk = :pk",
            "ExpressionAttributeNames": {"#pk": "pk"},
            "ExpressionAttributeValues": {":pk": {"S": run_id}},
            "ConsistentRead": True,
        }
        while True:
            page = self.dynamodb.query(**kwargs)
            items.extend(page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return items
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _history(self, arn: str) -> list[dict[str, Any]]:
        return execution_history(self.sfn, arn)

    def memory_mb(self, function: str) -> int:
        """The configured memory of a function (by ARN or name), cached.

        Raises:
            InspectError: the function's configuration cannot be read.
        """
        if function not in self._memory:
            try:
                config = self.lambda_client.get_function_configuration(FunctionName=function)
            except Exception as exc:  # noqa: BLE001 - access denied, deleted function...: say which
                raise InspectError(f"cannot read the memory size of {function} (lambda:GetFunctionConfiguration): {exc}") from None
            self._memory[function] = int(config["MemorySize"])
        return self._memory[function]
