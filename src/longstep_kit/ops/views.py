"""Read-only views of runs: where each run stands, the timeline of its steps, and what it cost.

Everything here is read from what a run leaves behind, never from a running Lambda:

- the executions of the run's state machine (a run's executions are its generations, named
  ``run_id`` then ``run_id--gN``: see ``longstep_kit.ops.runs``) and their histories;
- the run's records in the checkpoint table: recorded steps, and the records parked on a task
  token (``escalation#`` pending, ``signal#`` waiting);
- the run's pending requests in the approvals table (``longstep.humans.requests``).

A run's status is one of :data:`STATUSES`. A finished execution decides it (``succeeded``, or
``failed`` for FAILED, TIMED_OUT and ABORTED); a running one is ``escalated`` when a step waits for
a human's answer, ``waiting_for_approval`` when a tool call waits for a decision,
``waiting_for_event`` when a ``wait_for`` waits for a signal or a timer, else ``running``.

The cost estimate (:func:`estimate_cost`) multiplies counted usage by a price table; what is
counted and what is estimated is documented on :class:`Usage` and in ``docs/operations.md``.

Clients are injected (boto3 clients for Step Functions, DynamoDB and Lambda) or created on first
use with the default session.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping

from pydantic import BaseModel, ConfigDict, Field

from longstep import clock
from longstep import codec, keys, migrations
from longstep.humans import requests as approval_requests
from longstep.humans.table import PENDING as APPROVAL_PENDING, ApprovalTable
from longstep.executions import first_name
from longstep.errors import LongstepError
from longstep.store import CheckpointStore

RUNNING = "running"
WAITING_FOR_APPROVAL = "waiting_for_approval"
WAITING_FOR_EVENT = "waiting_for_event"
ESCALATED = "escalated"
FAILED = "failed"
SUCCEEDED = "succeeded"
STATUSES = (RUNNING, WAITING_FOR_APPROVAL, WAITING_FOR_EVENT, ESCALATED, FAILED, SUCCEEDED)
# The statuses of a run that waits on something outside itself (``longstep stuck``).
WAITING_STATUSES = (WAITING_FOR_APPROVAL, WAITING_FOR_EVENT, ESCALATED)

# The state machine's step states (src/longstep_kit/constructs/agent_loop.py) and the kind of step each runs.
STEP_STATES = {"ModelTurn": "model", "CallTool": "tool"}
# Point reads (GetItem, strongly consistent) one invocation of each task makes, as longstep.tasks
# does: ModelTurn reads the run record and its step record twice (before and under the lock);
# CallTool also reads the turn's model reply; RequestApproval reads the reply, the record naming
# its request and the request; Escalate the reply (of a tool call) and the parked record;
# WaitForEvent the reply; Finish and ContinueAsNew the run record; Init (a new run) nothing.
GET_ITEMS_PER_INVOCATION = {
    "Init": 0,
    "ModelTurn": 3,
    "CallTool": 4,
    "RequestApproval": 3,
    "WaitForEvent": 1,
    "EscalateModelTurn": 1,
    "EscalateCallTool": 2,
    "Finish": 1,
    "ContinueAsNew": 1,
}
# Writes of one approval request in the approvals table: created, marked notified, decided.
APPROVAL_REQUEST_WRITES = 3
# Checkpoint records written more than once: parked, then answered with an update.
_PARKED_PREFIXES = ("escalation#", "signal#")
_WAITING_RECORD_STATUSES = ("pending", "waiting")
_READ_UNIT_BYTES = 4096  # strongly consistent read: 1 RRU per 4 KB
_WRITE_UNIT_BYTES = 1024  # 1 WRU per 1 KB
_GIB = 1024**3
_AGE = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


class InspectError(LongstepError):
    """A view could not be built: no such run, a malformed age or price table."""


# -- small helpers ------------------------------------------------------------------------------


def parse_age(text: str) -> float:
    """Seconds in an age such as ``30m``, ``2h``, ``3d``, ``1h30m`` or ``0s``.

    Units: ``s``, ``m``, ``h``, ``d``, ``w``; a bare number is seconds.

    Raises:
        InspectError: the text is not an age.
    """
    value = text.strip().lower()
    if re.fullmatch(r"\d+(?:\.\d+)?", value):
        return float(value)
    if not value or _AGE.sub("", value):
        raise InspectError(f"{text!r} is not an age: use a number and a unit (s, m, h, d, w), e.g. 30m, 2h, 3d, 1h30m")
    return float(sum(float(n) * _AGE_UNITS[unit] for n, unit in _AGE.findall(value)))


def run_id_of(execution_name: str) -> str:
    """The run an execution belongs to: its name without a generation suffix (``--gN``)."""
    return first_name(execution_name)


def item_bytes(item: Mapping[str, Any]) -> int:
    """The size of a DynamoDB item (typed attribute values) as DynamoDB counts it (``longstep.codec``)."""
    return codec.item_size(item)


def _epoch(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value.timestamp()
    return float(value)


def _json(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return None


# -- what the views return ----------------------------------------------------------------------


@dataclass(frozen=True)
class Execution:
    """One Step Functions execution of a run.

    Attributes:
        name: ``run_id`` or ``run_id-resume-N``.
        arn: the execution ARN.
        status: RUNNING, SUCCEEDED, FAILED, TIMED_OUT or ABORTED.
        started: start time (epoch seconds).
        stopped: stop time (epoch seconds), None while running.
    """

    name: str
    arn: str
    status: str
    started: float
    stopped: float | None = None


@dataclass(frozen=True)
class RunState:
    """Where a run stands.

    Attributes:
        run_id: the run.
        status: one of :data:`STATUSES`.
        since: when the run entered this status (epoch seconds): when the approval, escalation or
            wait was requested, when the last execution stopped, or when it started.
        detail: what it waits for, why it is escalated, how it failed.
        execution: the run's latest execution (None when the history has expired).
        executions: how many executions the run has had.
    """

    run_id: str
    status: str
    since: float
    detail: str = ""
    execution: Execution | None = None
    executions: int = 1

    def age(self, now: float | None = None) -> float:
        """Seconds the run has been in its status."""
        return max(0.0, (clock.now() if now is None else now) - self.since)


@dataclass
class Attempt:
    """One Lambda invocation, as the execution history shows it.

    Attributes:
        state: the state that invoked it (``ModelTurn``, ``CallTool``, ``RequestApproval``...).
        execution: the execution's name.
        entry: the id of the state's ``*StateEntered`` event (attempts of one entry are retries).
        turn: the turn the invocation worked on (None for Init and Finish).
        call: the tool call index (None for a model turn).
        function: the function ARN.
        started: when the invocation started (epoch seconds).
        seconds: how long the invocation ran (None while it runs).
        ok: whether it returned (False: it raised, crashed or timed out).
        error: the error name of a failed invocation.
        waited: for a task-token task, how long it then waited for its token (None while it waits).
        open_wait: a task-token task whose token has not been answered yet.
    """

    state: str
    execution: str
    entry: int
    turn: int | None
    call: int | None
    function: str
    started: float
    seconds: float | None
    ok: bool
    error: str | None = None
    waited: float | None = None
    open_wait: bool = False


@dataclass
class TimelineEntry:
    """One row of a run's timeline: a recorded step, or a wait for a human or an event.

    Attributes:
        at: when the step was recorded or the wait began (epoch seconds).
        turn: the model turn.
        call: the tool call index (None for a model step).
        kind: ``model`` or ``tool`` (recorded steps); ``approval``, ``escalation`` or ``wait``.
        name: the model operation, the tool, or what is awaited.
        seconds: Lambda time spent on the step, all attempts and executions (from the history);
            for a wait, how long it waited (so far, when it still waits).
        input_tokens: model input tokens (model steps).
        output_tokens: model output tokens (model steps).
        bytes: size of the record in the checkpoint table.
        offloaded_bytes: size of the output stored in S3 instead (tool steps).
        retries: failed invocations of the step that Step Functions retried or escalated.
        result: the stop reason, the tool's status, or the human's answer.
        effect: the tool's effect class, when known.
    """

    at: float
    turn: int
    call: int | None
    kind: str
    name: str
    seconds: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    bytes: int = 0
    offloaded_bytes: int = 0
    retries: int = 0
    result: str = ""
    effect: str | None = None


@dataclass
class Usage:
    """What a run used, counted from its executions' histories and its records.

    Counted: ``state_transitions`` (``*StateEntered`` events of all the run's executions),
    ``retries`` (invocations after the first of one state entry: Step Functions bills each retry
    as a transition too), ``lambda_invocations`` (every invocation in the histories, task-token
    tasks included), ``lambda_seconds`` (each invocation from its start to its end event; for a
    task-token task, to the ``TaskSubmitted`` event: the wait that follows runs no Lambda),
    ``lambda_gb_seconds`` (those seconds times each function's configured memory), model tokens
    (the usage recorded with each model reply: a call whose reply was never recorded is not in it).

    Estimated from the records (DynamoDB and S3 report no per-run request counts):
    ``dynamodb_write_units``: every record of the run, ``ceil(size / 1 KB)`` per write, parked
    records written twice (parked, then answered), each approval request written
    :data:`APPROVAL_REQUEST_WRITES` times in the approvals table (once fewer while pending), plus
    the step lock (Powertools idempotency)
    of each recorded step: one unit when taken and the step's size when released with its result,
    and one unit per failed attempt. ``dynamodb_read_units``: the point reads each invocation makes
    (:data:`GET_ITEMS_PER_INVOCATION`, one unit each: records are under 4 KB) plus, for each model
    call made (not replayed) and for Finish, a query of the run's step records so far
    (``ceil(bytes / 4 KB)``). ``s3_puts``: one per offloaded output and large final answer;
    ``s3_gets``: none (the runtime gives the model a preview, not the stored object).
    ``dynamodb_bytes`` and ``s3_bytes``: the run's checkpoint records, and its offloaded outputs
    before compression.
    """

    executions: int = 0
    turns: int = 0
    tool_calls: int = 0
    state_transitions: int = 0
    retries: int = 0
    lambda_invocations: int = 0
    lambda_seconds: float = 0.0
    lambda_gb_seconds: float = 0.0
    dynamodb_write_units: int = 0
    dynamodb_read_units: int = 0
    s3_puts: int = 0
    s3_gets: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    model_id: str | None = None
    dynamodb_bytes: int = 0
    s3_bytes: int = 0

    @property
    def billed_transitions(self) -> int:
        """State transitions as Step Functions bills them: entered states plus retries."""
        return self.state_transitions + self.retries

    def as_dict(self) -> dict[str, Any]:
        """The counts as JSON-ready values."""
        return {**asdict(self), "billed_transitions": self.billed_transitions}


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


# -- the history of an execution ----------------------------------------------------------------

_LAMBDA_END = {"LambdaFunctionSucceeded": True, "LambdaFunctionFailed": False, "LambdaFunctionTimedOut": False}
_LAMBDA_EARLY_END = {"LambdaFunctionScheduleFailed", "LambdaFunctionStartFailed"}
_TASK_END = {"TaskSucceeded", "TaskFailed", "TaskTimedOut", "TaskAborted"}
_TASK_EARLY_END = {"TaskStartFailed", "TaskSubmitFailed"}


def attempts_of(events: list[dict[str, Any]], execution: str) -> list[Attempt]:
    """The Lambda invocations in one execution's history, with their durations and outcomes.

    Each ``LambdaFunctionScheduled`` (a plain Lambda task) or ``TaskScheduled`` (a task-token
    task, or a request-response one through the Lambda integration) starts one attempt; its start, end (and ``TaskSubmitted``) events are found through
    ``previousEventId``, and so is the ``*StateEntered`` event of the state that made it.
    A task token is never read: only the ``item`` of a task's payload is.
    """
    by_id = {e["id"]: e for e in events}
    children: dict[int, list[dict[str, Any]]] = {}
    for event in events:
        children.setdefault(event.get("previousEventId", 0), []).append(event)

    def child(parent: dict[str, Any] | None, types: Iterable[str]) -> dict[str, Any] | None:
        if parent is None:
            return None
        wanted = set(types)
        return next((e for e in children.get(parent["id"], []) if e["type"] in wanted), None)

    out = []
    for event in events:
        if event["type"] == "LambdaFunctionScheduled":
            details = event.get("lambdaFunctionScheduledEventDetails", {})
            payload, function = _json(details.get("input")) or {}, details.get("resource", "")
            started = child(event, ["LambdaFunctionStarted"])
            end = child(started, _LAMBDA_END) or child(event, _LAMBDA_EARLY_END)
            submitted = None
            ok = bool(end) and _LAMBDA_END.get(end["type"], False)
        elif event["type"] == "TaskScheduled" and event.get("taskScheduledEventDetails", {}).get("resourceType") == "lambda":
            details = event["taskScheduledEventDetails"]
            params = _json(details.get("parameters")) or {}
            body = params.get("Payload") if isinstance(params.get("Payload"), dict) else {}
            function = str(params.get("FunctionName", ""))
            started = child(event, ["TaskStarted"])
            if str(details.get("resource", "")).endswith("waitForTaskToken"):
                payload = body.get("item") or {}
                submitted = child(started, ["TaskSubmitted"])
                end = child(submitted, _TASK_END) or child(started, _TASK_END | _TASK_EARLY_END) or child(event, _TASK_EARLY_END)
                ok = submitted is not None
            else:  # request-response (CallTool, CheckCondition: the agent's function named at run time)
                payload, submitted = body, None
                end = child(started, _TASK_END | _TASK_EARLY_END) or child(event, _TASK_EARLY_END)
                ok = bool(end) and end["type"] == "TaskSucceeded"
        else:
            continue
        entered = _state_entered(event, by_id)
        state = entered.get("stateEnteredEventDetails", {}).get("name", "") if entered else ""
        began = _epoch((started or event)["timestamp"])
        # A task-token task's Lambda returns at TaskSubmitted; what follows is the wait.
        lambda_end = submitted if submitted is not None else end
        seconds = None if lambda_end is None else max(0.0, _epoch(lambda_end["timestamp"]) - began)
        turn, call = _turn_and_call(payload if isinstance(payload, dict) else {})
        attempt = Attempt(
            state=state,
            execution=execution,
            entry=entered["id"] if entered else event["id"],
            turn=turn,
            call=call,
            function=function,
            started=began,
            seconds=seconds,
            ok=ok,
            error=_error_of(end) if not ok and end is not None else None,
        )
        if submitted is not None:
            attempt.open_wait = end is None
            attempt.waited = None if end is None else max(0.0, _epoch(end["timestamp"]) - _epoch(submitted["timestamp"]))
        out.append(attempt)
    return out


def _state_entered(event: dict[str, Any], by_id: dict[int, dict[str, Any]]) -> dict[str, Any] | None:
    current = by_id.get(event.get("previousEventId", 0))
    for _ in range(10_000):  # a chain of retries; never loops, but never trusts that either
        if current is None or current["type"].endswith("StateEntered"):
            return current
        current = by_id.get(current.get("previousEventId", 0))
    return None


def _turn_and_call(payload: dict[str, Any]) -> tuple[int | None, int | None]:
    """A task's turn and call from its input: a tool item has ``turn`` and ``call``; a model turn's
    cursor names the turn to run as ``next_turn``."""
    if isinstance(payload.get("call"), int) and isinstance(payload.get("turn"), int):
        return payload["turn"], payload["call"]
    if isinstance(payload.get("next_turn"), int):
        return payload["next_turn"], None
    return None, None


def _error_of(event: dict[str, Any]) -> str:
    for key, value in event.items():
        if key.endswith("EventDetails") and isinstance(value, dict) and value.get("error"):
            return str(value["error"])
    return event["type"]


# -- the inspector ------------------------------------------------------------------------------


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
            found.extend(_execution(e) for e in page["executions"])
            if not page.get("nextToken"):
                break
            kwargs["nextToken"] = page["nextToken"]
        return sorted(found, key=lambda e: e.started)

    def run_executions(self, run_id: str) -> list[Execution]:
        """The executions of one run, oldest first."""
        return [e for e in self.executions() if run_id_of(e.name) == run_id]

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
        states = [self._state(run_id, execs, by_run.get(run_id, [])) for run_id, execs in groups.items()]
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

    def _state(self, run_id: str, executions: list[Execution], approvals: list[dict[str, Any]] | None = None) -> RunState:
        if not executions:
            final = self.store.get(run_id, keys.FINAL_RECORD)
            if final is not None:
                return RunState(run_id, SUCCEEDED, float(final.get("finished_at", 0)), "execution history expired", None, 0)
            return RunState(run_id, FAILED, 0.0, "no execution found (history expired?)", None, 0)
        last = executions[-1]
        count = len(executions)
        if last.status == "SUCCEEDED":
            return RunState(run_id, SUCCEEDED, last.stopped or last.started, f"execution {last.name}", last, count)
        if last.status != "RUNNING":
            detail = self._failure(last)
            return RunState(run_id, FAILED, last.stopped or last.started, detail, last, count)
        waiting = self.waiting_on(run_id, approvals)
        if waiting is not None:
            status, since, detail = waiting
            return RunState(run_id, status, since, detail, last, count)
        return RunState(run_id, RUNNING, last.started, self._progress(run_id, last), last, count)

    def _failure(self, execution: Execution) -> str:
        try:
            desc = self.sfn.describe_execution(executionArn=execution.arn)
        except Exception:  # noqa: BLE001 - a detail, never worth failing the listing for
            return execution.status
        error, cause = desc.get("error"), desc.get("cause")
        message = (_json(cause) or {}).get("errorMessage") if isinstance(_json(cause), dict) else cause
        parts = [execution.status] + [p for p in (error, message) if p]
        return ": ".join(str(p) for p in parts)[:300]

    def waiting_on(self, run_id: str, approvals: list[dict[str, Any]] | None = None) -> tuple[str, float, str] | None:
        """What a running run waits for, from its parked records: ``(status, since, detail)``.

        An escalation comes first (nothing moves until a human answers it), then approvals, then
        event waits (signals) and timers. None when it waits for nothing.

        Args:
            run_id: the run.
            approvals: the run's pending approval requests, when the caller has read them already.
        """
        store = self.store
        escalations = self._parked(store, run_id, "escalation#")
        if escalations:
            first = min(escalations, key=lambda r: r.get("requested_at", 0))
            turn, call = _turn_call_of(first["sk"])
            where = first.get("task") or "step"
            where += f" turn {turn}" + ("" if call is None else f" call {call} ({first.get('tool')})")
            why = ": ".join(str(p) for p in (first.get("error"), first.get("reason")) if p)
            return ESCALATED, float(first.get("requested_at", 0)), f"{where}: {why}"[:300]
        pending = self.pending_approvals(run_id) if approvals is None else approvals
        if pending:
            first = pending[0]
            more = f" (+{len(pending) - 1} more)" if len(pending) > 1 else ""
            detail = f"{first['tool']} (turn {first['turn']}, call {first['call']}){more}"
            return WAITING_FOR_APPROVAL, _from_iso(first.get("requested_at")), detail
        signals = self._parked(store, run_id, "signal#")
        if signals:
            first = min(signals, key=lambda r: r.get("requested_at", 0))
            event = keys.parse(first["sk"]).event
            match = _json(first.get("match")) or {}
            return WAITING_FOR_EVENT, float(first.get("requested_at", 0)), f"event {event}" + (f" matching {json.dumps(match)}" if match else "")
        timer = self._timer(run_id)
        if timer is not None:
            return timer
        return None

    @staticmethod
    def _parked(store: CheckpointStore, run_id: str, prefix: str) -> list[dict[str, Any]]:
        return [
            {k: v for k, v in item.items() if k != "task_token"}
            for item in store.query_prefix(run_id, prefix)
            if item.get("status") in _WAITING_RECORD_STATUSES
        ]

    def _latest_steps(self, run_id: str, limit: int = 50) -> list[dict[str, Any]]:
        resp = self.dynamodb.query(
            TableName=self.checkpoint_table,
            KeyConditionExpression="#pk = :pk AND begins_with(#sk, :prefix)",
            ExpressionAttributeNames={"#pk": "pk", "#sk": "sk"},
            ExpressionAttributeValues={":pk": {"S": run_id}, ":prefix": {"S": keys.STEP_PREFIX}},
            ScanIndexForward=False,
            Limit=limit,
            ConsistentRead=True,
        )
        return resp.get("Items", [])

    def _timer(self, run_id: str) -> tuple[str, float, str] | None:
        """A ``wait_for`` timer: the latest reply asked for one and its result is not recorded."""
        from longstep.messages import tool_uses
        from longstep.tools.builtins import WAIT_FOR, WaitForArgs

        items = self._latest_steps(run_id)
        model = next((i for i in items if i["sk"]["S"].endswith("#model")), None)
        if model is None:
            return None
        turn = keys.parse(model["sk"]["S"]).turn
        recorded = {k.call for k in (keys.parse(i["sk"]["S"]) for i in items) if k.kind == keys.TOOL and k.turn == turn}
        step = self.store.get_step(run_id, model["sk"]["S"])
        if step is None:
            return None
        at = float(model.get("recorded_at", {}).get("N", 0))
        for index, use in enumerate(tool_uses(step.result.get("message", {}))):
            if use.get("name") != WAIT_FOR or index in recorded:
                continue
            try:
                args = WaitForArgs.model_validate(use.get("input"))
            except ValueError:
                continue
            if args.event is None:
                until = args.timer_until(dt.datetime.fromtimestamp(step.result.get("at", at), dt.timezone.utc))
                return WAITING_FOR_EVENT, at, f"timer until {until} (turn {turn}, call {index})"
        return None

    def _progress(self, run_id: str, execution: Execution) -> str:
        # The newest records may be a snapshot and a summary of the turn under way.
        items = [i for i in self._latest_steps(run_id, limit=3) if keys.parse(i["sk"]["S"]).is_step]
        if not items:
            return f"execution {execution.name}, no step recorded yet"
        sk = items[0]["sk"]["S"]
        turn, call = _turn_call_of(sk)
        name = items[0].get("name", {}).get("S", "")
        step = f"turn {turn} {name}" if call is None else f"turn {turn} call {call} {name}"
        return f"execution {execution.name}, last step {step}"

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
        records = {item["sk"]["S"]: _plain(item) for item in raw}
        steps = {step.sk: step.result for step in self.store.steps(run_id)}
        requests = approval_requests.run_approvals(self.approvals, self.store, run_id) if self.approvals is not None else []
        run_record = migrations.upgrade(dict(records[keys.RUN_RECORD])) if keys.RUN_RECORD in records else {}
        shown = ("agent", "goal", "model", "max_turns", "created_at", "code_version", "code_parts", keys.FORKED_FROM)
        run = {k: v for k, v in run_record.items() if k in shown}
        for name in ("model", "code_parts", keys.FORKED_FROM):
            if isinstance(run.get(name), str):
                run[name] = _json(run[name])
        notes = []
        if effects is None:
            notes.append("effect classes unknown: side effects are the tools that wrote an intent marker or needed an approval")
        if not executions:
            notes.append("no execution found: the history has expired; durations and retries are unknown")
        if self.approvals is None and any(sk.startswith("approval#") for sk in records):
            notes.append("approvals table not given: approval requests are not shown")
        timeline = self._timeline(records, sizes, steps, attempts, requests, effects, now)
        usage = self._usage(records, sizes, steps, attempts, requests, transitions, len(executions), memory)
        models = [e for e in timeline if e.kind == "model"]
        effects_seen = [e for e in timeline if e.kind == "tool" and _is_effect(e, records)]
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
        events: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"executionArn": arn, "maxResults": 1000}
        while True:
            page = self.sfn.get_execution_history(**kwargs)
            events.extend(page["events"])
            if not page.get("nextToken"):
                return sorted(events, key=lambda e: e["id"])
            kwargs["nextToken"] = page["nextToken"]

    def _timeline(
        self,
        records: dict[str, dict[str, Any]],
        sizes: dict[str, int],
        steps: dict[str, Any],
        attempts: list[Attempt],
        requests: list[dict[str, Any]],
        effects: Mapping[str, str] | None,
        now: float,
    ) -> list[TimelineEntry]:
        spent: dict[tuple[int, int | None], float] = {}
        failed: dict[tuple[int, int | None], int] = {}
        for a in attempts:
            if a.state not in STEP_STATES or a.turn is None:
                continue
            key = (a.turn, a.call)
            spent[key] = spent.get(key, 0.0) + (a.seconds or 0.0)
            failed[key] = failed.get(key, 0) + (0 if a.ok else 1)
        rows: list[TimelineEntry] = []
        for sk, record in records.items():
            if sk.startswith(keys.STEP_PREFIX) and keys.parse(sk).is_step:
                turn, call = _turn_call_of(sk)
                result = steps.get(sk) or {}
                row = TimelineEntry(
                    at=float(record.get("recorded_at", 0)),
                    turn=turn,
                    call=call,
                    kind=record.get("kind", "model" if call is None else "tool"),
                    name=record.get("name", ""),
                    seconds=spent.get((turn, call)),
                    bytes=sizes[sk],
                    retries=failed.get((turn, call), 0),
                )
                if row.kind == "model":
                    usage = result.get("usage") or {}
                    row.input_tokens = int(usage.get("inputTokens", 0))
                    row.output_tokens = int(usage.get("outputTokens", 0))
                    row.result = _model_result(result)
                else:
                    row.result = str(result.get("status", ""))
                    row.offloaded_bytes = _offloaded_bytes(result)
                    if effects is not None:
                        row.effect = effects.get(row.name)
                rows.append(row)
            elif sk.startswith(_PARKED_PREFIXES):
                rows.append(_parked_row(sk, record, sizes[sk], now))
        for request in requests:
            rows.append(_approval_row(request, sizes.get(keys.approval_key(request["turn"], request["call"]), 0), now))
        _place_waits(rows, steps)
        # Turns run one after the other: a turn's rows in call order, each call's wait for a human
        # or an event before its step (approval request times are kept to the second).
        return sorted(rows, key=lambda r: (r.turn, -1 if r.call is None else r.call, _RANK.get(r.kind, 3), r.at))

    def _usage(
        self,
        records: dict[str, dict[str, Any]],
        sizes: dict[str, int],
        steps: dict[str, Any],
        attempts: list[Attempt],
        requests: list[dict[str, Any]],
        transitions: int,
        executions: int,
        memory: bool,
    ) -> Usage:
        usage = Usage(executions=executions, state_transitions=transitions)
        usage.lambda_invocations = len(attempts)
        entries: dict[tuple[str, int], int] = {}
        for a in attempts:
            entries[(a.execution, a.entry)] = entries.get((a.execution, a.entry), 0) + 1
            usage.lambda_seconds += a.seconds or 0.0
            if memory and a.seconds:
                usage.lambda_gb_seconds += a.seconds * self.memory_mb(a.function) / 1024
        usage.retries = sum(n - 1 for n in entries.values())
        model = records.get(keys.RUN_RECORD, {}).get("model")
        choice = _json(model) if isinstance(model, str) else model
        if isinstance(choice, dict):
            usage.model_id = choice.get("model_id") or (None if choice.get("provider") == "bedrock" else choice.get("provider"))
        # reads: point reads per invocation, and the step-record query of each model call made
        usage.dynamodb_read_units = sum(GET_ITEMS_PER_INVOCATION.get(a.state, 0) for a in attempts)
        step_keys = sorted(sk for sk in records if sk.startswith(keys.STEP_PREFIX))
        before = 0
        for sk in step_keys:
            result = steps.get(sk) or {}
            if records[sk].get("kind") == "model":
                usage.turns += 1
                usage.dynamodb_read_units += math.ceil(before / _READ_UNIT_BYTES)
                tokens = result.get("usage") or {}
                usage.input_tokens += int(tokens.get("inputTokens", 0))
                usage.output_tokens += int(tokens.get("outputTokens", 0))
            else:
                usage.tool_calls += 1
                offloaded = _offloaded_bytes(result)
                if offloaded:
                    usage.s3_puts += 1
                    usage.s3_bytes += offloaded
            before += sizes[sk]
        if any(a.state == "Finish" for a in attempts):
            usage.dynamodb_read_units += math.ceil(before / _READ_UNIT_BYTES)
        # writes: each record (parked ones twice), and the step locks
        for sk, size in sizes.items():
            units = math.ceil(size / _WRITE_UNIT_BYTES)
            usage.dynamodb_write_units += units * _writes_of(sk, records[sk])
            usage.dynamodb_bytes += size
            if sk.startswith(keys.STEP_PREFIX):
                usage.dynamodb_write_units += 1 + units
        usage.dynamodb_write_units += sum(1 for a in attempts if a.state in STEP_STATES and not a.ok)
        usage.dynamodb_write_units += sum(APPROVAL_REQUEST_WRITES - (r["status"] == APPROVAL_PENDING) for r in requests)
        final = _json(records.get(keys.FINAL_RECORD, {}).get("output"))
        if isinstance(final, dict) and final.get("output_ref"):
            usage.s3_puts += 1
            usage.s3_bytes += int(final["output_ref"].get("bytes", 0))
        return usage

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


def _execution(e: dict[str, Any]) -> Execution:
    return Execution(
        name=e["name"], arn=e["executionArn"], status=e["status"], started=_epoch(e["startDate"]) or 0.0, stopped=_epoch(e.get("stopDate"))
    )


def _plain(item: dict[str, Any]) -> dict[str, Any]:
    """A typed item as plain values, its task token dropped (never shown, never kept)."""
    return {name: value for name, value in codec.plain(item).items() if name != "task_token"}


def _turn_call_of(sk: str) -> tuple[int, int | None]:
    """``step#000003#tool#001`` -> (3, 1); ``step#000003#model`` -> (3, None);
    ``approval#000003#001`` -> (3, 1); ``escalation#000003#-01`` -> (3, None); ``signal#x`` -> (0, None)."""
    key = keys.parse(sk)
    return key.turn or 0, key.call if key.call is not None and key.call >= 0 else None


def _model_result(result: dict[str, Any]) -> str:
    from longstep.messages import tool_uses

    names = [u.get("name", "?") for u in tool_uses(result.get("message") or {"content": []})]
    text = str(result.get("stop_reason", ""))
    return f"{text}: {', '.join(names)}" if names else text


def _offloaded_bytes(result: Any) -> int:
    content = result.get("content") if isinstance(result, dict) else None
    ref = content.get("offloaded") if isinstance(content, dict) else None
    return int(ref.get("bytes", 0)) if isinstance(ref, dict) else 0


def _writes_of(sk: str, record: dict[str, Any]) -> int:
    """How many times a record was written: once, or parked then answered (an escalation once
    per time it was parked)."""
    if not sk.startswith(_PARKED_PREFIXES):
        return 1
    times = int(record.get("times", 1))
    answered = record.get("status") not in _WAITING_RECORD_STATUSES and record.get("status") is not None
    return times + (times if answered else times - 1)


def _parked_row(sk: str, record: dict[str, Any], size: int, now: float) -> TimelineEntry:
    key = keys.parse(sk)
    kind = key.kind
    status = record.get("status", "")
    waiting = status in _WAITING_RECORD_STATUSES
    if kind == "signal":
        turn, call = 0, None
        name = key.event or ""
        start = record.get("requested_at") or record.get("signaled_at") or 0
        end = record.get("consumed_at")
        kind = "wait"
        result = status
    else:
        turn, call = _turn_call_of(sk)
        start = record.get("requested_at", 0)
        end = record.get("decided_at")
        decision = _json(record.get("decision")) or {}
        name = f"{record.get('task', '')} {record.get('error', '')}".strip()
        result = "pending" if waiting else str(decision.get("action", status))
    seconds = (now if waiting else float(end or start)) - float(start) if start else None
    return TimelineEntry(at=float(start), turn=turn, call=call, kind=kind, name=name, seconds=seconds, bytes=size, result=result)


_RANK = {"approval": 0, "wait": 1, "escalation": 2}


def _place_waits(rows: list[TimelineEntry], steps: dict[str, Any]) -> None:
    """Give each signal wait the turn and call of the latest ``wait_for`` on its event."""
    from longstep.messages import tool_uses

    calls: dict[str, tuple[int, int]] = {}
    for sk in sorted(steps):
        if sk.endswith("#model"):
            turn, _ = _turn_call_of(sk)
            for index, use in enumerate(tool_uses((steps[sk] or {}).get("message") or {"content": []})):
                event = (use.get("input") or {}).get("event") if use.get("name") == "wait_for" else None
                if isinstance(event, str):
                    calls[event] = (turn, index)
    for row in rows:
        if row.kind == "wait" and row.name in calls:
            row.turn, row.call = calls[row.name]


def _approval_row(request: dict[str, Any], size: int, now: float) -> TimelineEntry:
    """A row for one approval request (a view from ``longstep.humans.requests``)."""
    start = _from_iso(request.get("requested_at"))
    waiting = request.get("status") == APPROVAL_PENDING
    end = now if waiting else _from_iso(request.get("decided_at") or request.get("expires_at")) or now
    return TimelineEntry(
        at=start,
        turn=int(request["turn"]),
        call=int(request["call"]),
        kind="approval",
        name=str(request.get("tool", "")),
        seconds=max(0.0, end - start) if start else None,
        bytes=size,
        result=str(request.get("status", "")),
    )


def _from_iso(text: Any) -> float:
    """Epoch seconds of an ISO 8601 instant (``2025-01-31T12:00:00Z``); 0 when absent."""
    if not text:
        return 0.0
    if isinstance(text, (int, float)):
        return float(text)
    return dt.datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()


def _is_effect(row: TimelineEntry, records: dict[str, dict[str, Any]]) -> bool:
    if row.effect is not None:
        return row.effect != "read"
    call = row.call if row.call is not None else 0
    return keys.intent_key(row.turn, call) in records or keys.approval_key(row.turn, call) in records


# -- prices and the cost estimate ---------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StepFunctionsPrices(_Strict):
    """Standard workflows."""

    per_1000_state_transitions: float = Field(ge=0)


class LambdaPrices(_Strict):
    """Lambda on the functions' architecture."""

    per_gb_second: float = Field(ge=0)
    per_million_requests: float = Field(ge=0)


class DynamoDBPrices(_Strict):
    """On-demand capacity, Standard table class."""

    per_million_write_request_units: float = Field(ge=0)
    per_million_read_request_units: float = Field(ge=0)
    per_gb_month: float = Field(ge=0)


class S3Prices(_Strict):
    """S3 Standard."""

    per_1000_put_requests: float = Field(ge=0)
    per_1000_get_requests: float = Field(ge=0)
    per_gb_month: float = Field(ge=0)


class ModelPrices(_Strict):
    """On-demand model tokens."""

    per_million_input_tokens: float = Field(ge=0)
    per_million_output_tokens: float = Field(ge=0)


class Prices(_Strict):
    """A price table (``longstep_kit/prices.json``).

    Attributes:
        region: the region the prices are for.
        currency: the currency (USD).
        as_of: when the prices were read off the providers' price pages.
        default_model: the ``models`` entry for runs whose model is not in the table (scripted
            runs, the stack's default model).
        models: per model id (a Bedrock model id; a cross-region profile's ``us.``/``eu.``
            prefix is ignored when looking up).
    """

    region: str
    currency: str = "USD"
    as_of: str
    note: str = ""
    step_functions: StepFunctionsPrices
    lambda_: LambdaPrices = Field(alias="lambda")
    dynamodb: DynamoDBPrices
    s3: S3Prices
    default_model: str
    models: dict[str, ModelPrices]

    def model(self, model_id: str | None) -> tuple[str, ModelPrices]:
        """The prices of ``model_id`` (and the id they are listed under), else the default's."""
        if model_id:
            for candidate in (model_id, model_id.split(".", 1)[1] if model_id.count(".") >= 2 else model_id):
                if candidate in self.models:
                    return candidate, self.models[candidate]
        if self.default_model not in self.models:
            raise InspectError(f"prices: default_model {self.default_model!r} is not in models")
        return self.default_model, self.models[self.default_model]


def load_prices(text: str) -> Prices:
    """Parse a price table from JSON text.

    Raises:
        InspectError: naming each invalid field.
    """
    from pydantic import ValidationError

    try:
        return Prices.model_validate_json(text)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors())
        raise InspectError(f"invalid price table: {problems}") from None


@dataclass(frozen=True)
class CostLine:
    """One item of a cost estimate: ``quantity`` × ``unit_price`` = ``dollars``.

    Attributes:
        item: what is priced.
        quantity: how much of it.
        unit: its unit.
        unit_price: dollars per unit.
        dollars: quantity × unit_price.
        per: the quantity the price table quotes a price for (1, 1,000 or 1,000,000 units).
    """

    item: str
    quantity: float
    unit: str
    unit_price: float
    dollars: float
    per: int = 1


@dataclass
class CostEstimate:
    """A run's estimated cost.

    Attributes:
        lines: the items, in a fixed order; ``total`` is their sum.
        total: dollars for what the run did (requests, compute, tokens).
        infrastructure: ``total`` without the model tokens.
        storage_per_month: dollars per month that the run's records and artifacts stay stored
            (not in ``total``: they expire after the retention period).
        model: the price table entry the tokens were priced with.
        prices_as_of: the price table's date.
    """

    lines: list[CostLine]
    total: float
    infrastructure: float
    storage_per_month: float
    model: str
    prices_as_of: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def estimate_cost(usage: Usage, prices: Prices, *, include_model: bool = True) -> CostEstimate:
    """Dollars for ``usage`` under ``prices``.

    total = billed_transitions × sfn/1000 + gb_seconds × lambda/GB-s + invocations × lambda/1M
          + WRU × ddb_write/1M + RRU × ddb_read/1M + puts × s3_put/1000 + gets × s3_get/1000
          + input_tokens × model_in/1M + output_tokens × model_out/1M

    Args:
        usage: what the run used.
        prices: the price table.
        include_model: price the model tokens (False: infrastructure only).
    """
    model_name, model = prices.model(usage.model_id)
    lam, ddb, s3 = prices.lambda_, prices.dynamodb, prices.s3
    thousand, million = 1000, 1_000_000
    rows: list[tuple[str, float, str, float, int]] = [
        ("step functions transitions", usage.billed_transitions, "transition", prices.step_functions.per_1000_state_transitions, thousand),
        ("lambda compute", usage.lambda_gb_seconds, "GB-second", lam.per_gb_second, 1),
        ("lambda requests", usage.lambda_invocations, "request", lam.per_million_requests, million),
        ("dynamodb writes", usage.dynamodb_write_units, "WRU", ddb.per_million_write_request_units, million),
        ("dynamodb reads", usage.dynamodb_read_units, "RRU", ddb.per_million_read_request_units, million),
        ("s3 puts", usage.s3_puts, "request", s3.per_1000_put_requests, thousand),
        ("s3 gets", usage.s3_gets, "request", s3.per_1000_get_requests, thousand),
    ]
    infrastructure = len(rows)
    if include_model:
        rows += [
            ("model input tokens", usage.input_tokens, "token", model.per_million_input_tokens, million),
            ("model output tokens", usage.output_tokens, "token", model.per_million_output_tokens, million),
        ]
    lines = [CostLine(item, float(qty), unit, quoted / per, float(qty) * quoted / per, per) for item, qty, unit, quoted, per in rows]
    storage = usage.dynamodb_bytes / _GIB * ddb.per_gb_month + usage.s3_bytes / _GIB * s3.per_gb_month
    return CostEstimate(
        lines=lines,
        total=sum(line.dollars for line in lines),
        infrastructure=sum(line.dollars for line in lines[:infrastructure]),
        storage_per_month=storage,
        model=model_name,
        prices_as_of=prices.as_of,
    )

