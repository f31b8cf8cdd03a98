"""Bulk operations over a ``--where`` selection: stop, resume, redrive or signal many runs, at a
bounded rate, resumable, each run's outcome in the audit trail (``longstep_kit.ops.bulk_audit``).

Safe by default: ``plan`` only selects (``--dry-run`` prints it); ``run`` files the selection
first, then acts on one run at a time through a token bucket, writing before each action what it
will do (for a restart, the execution name it starts), so an interrupted operation is continued
(``resume_operation``) without doing anything twice:

- ``stop``: the run's durable stop request (``longstep.steering``), idempotent.
- ``resume``/``redrive``: a new execution of the run under a name fixed before the call;
  Step Functions refuses a second execution of a name (``ExecutionAlreadyExists``), so a retry
  finds the first. A redrive takes only runs whose latest execution failed, timed out or was
  aborted, and first replays the run's records against the code deployed now
  (``longstep_kit.ops.replay``): a run that would diverge is left alone unless forced.
  Step Functions' own RedriveExecution is not used: "redriven executions use the same state
  machine definition and execution ARN as the original execution attempt"
  (https://docs.aws.amazon.com/step-functions/latest/apireference/API_RedriveExecution.html), so
  a redriven run would go on with the version (and the published Lambda versions) it started on,
  not the code now deployed that the gate has just checked; and moto's engine lacks it.
- ``signal``: at most once: a signal whose send was begun but not recorded is reported
  ``unknown`` on continuation and not sent again (a signal is an effect on the run).

Rates: Step Functions throttles per account and Region with token buckets; outside us-east-1,
us-west-2 and eu-west-1, StartExecution refills 150 per second, StopExecution 25 and
DescribeExecution 10 (https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html
#service-limits-api-action-throttling-general). Each run costs about one DescribeExecution and
one StartExecution here, so the default ``DEFAULT_RATE`` stays under half the smallest refill.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from botocore.exceptions import ClientError

from longstep import keys, run_status, runs_index, steering
from longstep.contract.run import RunRecord
from longstep.errors import LongstepError
from longstep.executions import GENERATION_SUFFIX, generation_name
from longstep.store import CheckpointStore
from longstep_kit.ops.bulk_audit import ACTING, DONE, AuditTrail
from longstep_kit.ops.fleet_query import RunsQuery, execution_arn

VERBS = ("stop", "resume", "redrive", "signal")
DEFAULT_RATE = 5.0  # runs per second
DEFAULT_BURST = 5
REDRIVABLE = (runs_index.FAILED, runs_index.TIMED_OUT, runs_index.ABORTED)
RESUMABLE = (*REDRIVABLE, runs_index.STOPPED)


class BulkError(LongstepError):
    """A bulk operation that cannot start (an unknown verb, a missing option)."""


@dataclass
class TokenBucket:
    """At most ``burst`` actions at once and ``rate`` per second after: each ``take`` waits
    (``sleep``) until a token is there. ``waited`` sums the waits."""

    rate: float = DEFAULT_RATE
    burst: int = DEFAULT_BURST
    now: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    waited: float = 0.0
    _tokens: float | None = None
    _at: float = 0.0

    def take(self) -> None:
        current = self.now()
        if self._tokens is None:
            self._tokens, self._at = float(self.burst), current
        self._tokens = min(float(self.burst), self._tokens + (current - self._at) * self.rate)
        self._at = current
        if self._tokens < 1:
            wait = (1 - self._tokens) / self.rate
            self.sleep(wait)
            self.waited += wait
            self._tokens, self._at = 1.0, self._at + wait
        self._tokens -= 1


@dataclass
class Selection:
    """What an operation would act on: each run's index record and whether it is eligible."""

    verb: str
    where: str
    runs: list[dict[str, Any]]
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def eligible(self) -> list[dict[str, Any]]:
        return [r for r in self.runs if r["run_id"] not in self.skipped]


@dataclass
class BulkRunner:
    """Bulk operations on one deployment.

    Args:
        store: the checkpoint store.
        sfn: a Step Functions client.
        state_machine_arn: the agent state machine.
        query: the runs index (``RunsQuery``).
        who: who runs the operation (recorded).
        bucket: the rate limit.
        replay_gate: ``run_id -> list of divergences`` against the code deployed now (redrive).
        send_signal: ``(run_id, event, payload) -> outcome`` (signal).
        stop_run: ``(run_id, reason)``: the stop (default: the run's durable stop request; the CLI
            passes ``Steering``'s, which also wakes what the run is parked on and its children).
        fault: called with ``(stage, run_id)`` at each stage (``before``, ``acted``): the crash
            campaign's hook; raising there interrupts the operation.
    """

    store: CheckpointStore
    sfn: Any
    state_machine_arn: str
    query: RunsQuery
    who: str = "cli"
    bucket: TokenBucket = field(default_factory=TokenBucket)
    replay_gate: Callable[[str], list[str]] | None = None
    send_signal: Callable[[str, str, dict[str, Any]], str] | None = None
    stop_run: Callable[[str, str], Any] | None = None
    fault: Callable[[str, str], None] = lambda stage, run_id: None

    @property
    def audit(self) -> AuditTrail:
        return AuditTrail(self.store)

    def plan(self, verb: str, where: str) -> Selection:
        """The runs ``verb`` would act on (nothing is written but settled statuses)."""
        if verb not in VERBS:
            raise BulkError(f"verb: {verb!r} is not one of {', '.join(VERBS)}")
        selection = Selection(verb, where, self.query.select(where))
        for run in selection.runs:
            reason = _ineligible(verb, str(run.get("status")))
            if reason:
                selection.skipped[run["run_id"]] = reason
        return selection

    def run(self, verb: str, where: str, options: dict[str, Any] | None = None) -> str:
        """Select, file the selection and act on it; returns the operation id (see ``resume_operation``)."""
        options = dict(options or {})
        if verb == "signal" and not options.get("event"):
            raise BulkError("event: a bulk signal needs the event name (--event)")
        selection = self.plan(verb, where)
        op_id = self.audit.create(verb, where, self.who, options)
        self.audit.add_runs(op_id, [r["run_id"] for r in selection.runs])
        self.resume_operation(op_id)
        return op_id

    def resume_operation(self, op_id: str) -> dict[str, int]:
        """Act on the operation's runs not yet done; returns the count of each outcome."""
        op = self.audit.operation(op_id)
        op_id = op["op_id"]
        for record in self.audit.runs(op_id):
            if record.get("state") == DONE:
                continue
            self.bucket.take()
            run_id = str(record["run_id"])
            outcome, detail = self._act(op, run_id, record)
            self.audit.outcome(op_id, run_id, outcome, detail)
        counts = dict(Counter(str(r.get("outcome")) for r in self.audit.runs(op_id)))
        self.audit.finish(op_id, counts)
        return counts

    # the actions -----------------------------------------------------------------------------

    def _act(self, op: dict[str, Any], run_id: str, record: dict[str, Any]) -> tuple[str, str]:
        verb, options = op["verb"], op.get("options") or {}
        plan = record.get("plan")
        plan = json.loads(plan) if isinstance(plan, str) else plan
        index = self.store.get(run_id, keys.RUN_INDEX_RECORD)
        if index is None:
            return "skipped", "the run is not in the runs index"
        status = str(index.get("status"))
        if record.get("state") == ACTING and plan:  # an earlier attempt began this run's action
            return self._continue(op["op_id"], verb, run_id, plan, options)
        reason = _ineligible(verb, status)
        if reason:
            return "skipped", reason
        self.fault("before", run_id)
        if verb == "stop":
            self.audit.acting(op["op_id"], run_id, {"stop": True})
            self._stop(run_id, str(options.get("reason") or f"bulk stop {op['op_id']}"))
            self.fault("acted", run_id)
            return "stopped", "stops at its next step boundary"
        if verb == "signal":
            self.audit.acting(op["op_id"], run_id, {"signal": options["event"]})
            assert self.send_signal is not None
            sent = self.send_signal(run_id, str(options["event"]), dict(options.get("payload") or {}))
            self.fault("acted", run_id)
            return sent, f"signal {options['event']}"
        if verb == "redrive":
            divergences = self.replay_gate(run_id) if self.replay_gate is not None else []
            if divergences and not options.get("force"):
                return "diverged", "; ".join(divergences)[:1000]
        name = generation_name(run_id, int(index.get("generation") or 0) + 1)
        self.audit.acting(op["op_id"], run_id, {"start": name})
        return self._start(run_id, name)

    def _continue(self, op_id: str, verb: str, run_id: str, plan: dict[str, Any], options: dict[str, Any]) -> tuple[str, str]:
        if "start" in plan:
            return self._start(run_id, str(plan["start"]))  # refused as a duplicate if it was started
        if "stop" in plan:
            self._stop(run_id, str(options.get("reason") or f"bulk stop {op_id}"))  # idempotent
            return "stopped", "stops at its next step boundary"
        return "unknown", "the signal may or may not have been sent before the operation was interrupted; it is not sent again"

    def _stop(self, run_id: str, reason: str) -> None:
        if self.stop_run is not None:
            self.stop_run(run_id, reason)
        else:
            steering.stop(self.store, run_id, reason)

    def _start(self, run_id: str, name: str) -> tuple[str, str]:
        """A new execution of the run named ``name``, with the run's original input."""
        first = self.sfn.describe_execution(executionArn=execution_arn(self.state_machine_arn, run_id))
        payload = {**json.loads(first["input"]), "generation": int(name.rpartition(GENERATION_SUFFIX)[2])}
        run = RunRecord.from_dict(self.store.get(run_id, keys.RUN_RECORD) or {})
        if run.steering.stop_reason is not None:
            steering.clear_stop(self.store, run_id)
        try:
            self.fault("before-start", run_id)
            self.sfn.start_execution(stateMachineArn=self._target(run_id, name), name=name, input=json.dumps(payload))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ExecutionAlreadyExists":
                raise
            return "resumed", f"execution {name} (started before the operation was interrupted)"
        self.fault("acted", run_id)
        return "resumed", f"execution {name}"

    def _target(self, run_id: str, name: str) -> str:
        """A pinned run resumes on the version its last execution ran (as ``longstep resume``)."""
        previous = name.rpartition(GENERATION_SUFFIX)[2]
        latest = generation_name(run_id, int(previous) - 1) if previous.isdigit() else run_id
        try:
            desc = self.sfn.describe_execution(executionArn=execution_arn(self.state_machine_arn, latest))
        except ClientError:
            return self.state_machine_arn
        return desc.get("stateMachineVersionArn") or self.state_machine_arn


def _ineligible(verb: str, status: str) -> str | None:
    """Why a run in ``status`` is left out of ``verb``, or None."""
    if verb in ("stop", "signal") and status not in run_status.OPEN:
        return f"it is {status}: nothing to {verb}"
    if verb == "redrive" and status not in REDRIVABLE:
        return f"it is {status}: only failed, timed out or aborted runs are redriven"
    if verb == "resume" and status not in RESUMABLE:
        return f"it is {status}: only failed, stopped, timed out or aborted runs are resumed"
    return None
