"""The polling baseline: the state machine a polling agent would run, on the same moto engine.

A polling design that holds no compute between checks is a Step Functions loop::

    Check (Lambda: read the decision record) -> Decided? (Choice) -> WaitInterval (Wait 5 s) -> Check ...
                                                                 \\-> NextStep (Lambda)

Each poll that finds nothing enters Check, Decided? and WaitInterval (3 state transitions) and
invokes the check Lambda once. The bench registers this definition with moto's executing Step
Functions engine (next to the deployed Longstep stack, same process, same dispatcher, same local
clock) and

- runs it for ``polls`` unsuccessful polls with the local clock (5 s Wait states pass in
  microseconds) and counts, from the execution history, the transitions, history events and
  Lambda invocations of one poll;
- runs ``executions`` of it side by side in real time (the virtual clock ticking with the wall
  clock, every ``REAL_TIME_TICK_SECONDS``: Wait states of a real 5 s), writes each
  execution's decision at a planned point of its poll cycle and measures the time to its
  NextStep starting: the reaction time of a 5 s poller, measured rather than assumed.

The 3-day counts are the per-poll counts times 3 * 86,400 / 5 polls (``extrapolate``).
"""

from __future__ import annotations

import io
import json
import threading
import time
import zipfile
from dataclasses import dataclass, field
from typing import Any

from bench.waits.poll_handlers import TABLE_ENV

ACCOUNT = "123456789012"
REGION = "us-east-1"
PREFIX = "bench-waits-poll"
ROLE = f"{PREFIX}-role"
TABLE = f"{PREFIX}-decisions"
CHECK_FN = f"{PREFIX}-check"
REAL_TIME_TICK_SECONDS = 0.005  # the virtual clock's step while the pollers run in real time
NEXT_FN = f"{PREFIX}-next"
MACHINE = f"{PREFIX}-machine"
LOOP_STATES = ("Check", "Decided", "WaitInterval")


def definition(interval_seconds: int) -> dict[str, Any]:
    """The polling loop's ASL."""
    fn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:"
    return {
        "Comment": f"A polling agent: check every {interval_seconds} s until the decision is in, then go on",
        "StartAt": "Check",
        "States": {
            "Check": {
                "Type": "Task",
                "Resource": fn + CHECK_FN,
                "Parameters": {"key.$": "$.key"},
                "ResultPath": "$.check",
                "Next": "Decided",
            },
            "Decided": {
                "Type": "Choice",
                "Choices": [{"Variable": "$.check.decided", "BooleanEquals": True, "Next": "NextStep"}],
                "Default": "WaitInterval",
            },
            "WaitInterval": {"Type": "Wait", "Seconds": interval_seconds, "Next": "Check"},
            "NextStep": {"Type": "Task", "Resource": fn + NEXT_FN, "End": True},
        },
    }


@dataclass
class PollingMachine:
    """The polling loop registered on a running :class:`longstep_kit.local.stack.LocalStack`."""

    stack: Any
    interval_seconds: int = 5
    arn: str = ""
    table: str = TABLE

    def deploy(self) -> "PollingMachine":
        iam, lam, ddb, sfn = (self.stack.client(s) for s in ("iam", "lambda", "dynamodb", "stepfunctions"))
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Principal": {"Service": ["lambda.amazonaws.com", "states.amazonaws.com"]}, "Action": "sts:AssumeRole"}
            ],
        }
        role = iam.create_role(RoleName=ROLE, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
        # Least privilege, as a deploy of the poller would grant it: the check reads its table, the
        # state machine invokes its two functions. The local stack's enforcement (on) checks the
        # poller's calls against this policy, as it checks Longstep's roles against the template's.
        fn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:"
        statements = [
            {"Effect": "Allow", "Action": "dynamodb:GetItem", "Resource": f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{self.table}"},
            {"Effect": "Allow", "Action": "lambda:InvokeFunction", "Resource": [fn + CHECK_FN, fn + NEXT_FN]},
        ]
        iam.put_role_policy(
            RoleName=ROLE, PolicyName=f"{PREFIX}-policy", PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": statements})
        )
        self.stack.enforcement.allow_role(role, statements, state_machine=True)
        ddb.create_table(
            TableName=self.table,
            KeySchema=[{"AttributeName": "key", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "key", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        code = io.BytesIO()
        with zipfile.ZipFile(code, "w") as zf:  # moto wants a zip; the dispatcher runs bench/waits/poll_handlers.py
            zf.writestr("placeholder.py", "")
        for name, handler in ((CHECK_FN, "bench.waits.poll_handlers.check"), (NEXT_FN, "bench.waits.poll_handlers.next_step")):
            lam.create_function(
                FunctionName=name,
                Runtime="python3.12",
                Role=role,
                Handler=handler,
                Code={"ZipFile": code.getvalue()},
                Timeout=10,
                MemorySize=128,
                Environment={"Variables": {TABLE_ENV: self.table}},
            )
        self.arn = sfn.create_state_machine(name=MACHINE, definition=json.dumps(definition(self.interval_seconds)), roleArn=role)["stateMachineArn"]
        return self

    def start(self, key: str) -> str:
        return self.stack.client("stepfunctions").start_execution(stateMachineArn=self.arn, name=key, input=json.dumps({"key": key}))["executionArn"]

    def decide(self, key: str) -> None:
        self.stack.client("dynamodb").put_item(TableName=self.table, Item={"key": {"S": key}, "decided_at": {"N": str(time.time())}})

    def wait_done(self, arn: str, timeout: float = 60.0) -> dict[str, Any]:
        sfn = self.stack.client("stepfunctions")
        deadline = time.monotonic() + timeout
        while True:
            described = sfn.describe_execution(executionArn=arn)
            if described["status"] != "RUNNING":
                return described
            if time.monotonic() > deadline:
                sfn.stop_execution(executionArn=arn, error="BenchTimeout")
                raise RuntimeError(f"polling execution {arn} still running after {timeout} s")
            time.sleep(0.02)


def history(sfn: Any, arn: str) -> list[dict[str, Any]]:
    from longstep_kit.ops.views.history import execution_history

    return execution_history(sfn, arn)


def _entered_name(event: dict[str, Any]) -> str | None:
    details = event.get("stateEnteredEventDetails")
    return details.get("name") if details and event["type"].endswith("StateEntered") else None


def count_polls(machine: PollingMachine, starts: "InvocationStarts", polls: int) -> dict[str, Any]:
    """One execution that polls ``polls`` times in vain (the local clock skips the 5 s waits),
    then finds the decision: the per-poll cost, counted from its history."""
    stack = machine.stack
    key = f"count-{polls}"
    checks = {"n": 0}
    decided = threading.Event()

    def after_check(inv: Any) -> None:
        # The decision lands as the last vain check returns: check number polls + 1 finds it.
        if inv.function == CHECK_FN and inv.event.get("key") == key:
            checks["n"] += 1
            if checks["n"] == polls and not decided.is_set():
                machine.decide(key)
                decided.set()

    waits_before = len(stack.clock.waits)
    first = len(starts.records)
    stack.dispatcher.after_invoke.append(after_check)
    started = time.perf_counter()
    try:
        arn = machine.start(key)
        described = machine.wait_done(arn, timeout=600)
    finally:
        stack.dispatcher.after_invoke.remove(after_check)
    wall = time.perf_counter() - started
    events = history(stack.client("stepfunctions"), arn)
    entered = [(i, _entered_name(e)) for i, e in enumerate(events) if _entered_name(e)]
    check_idx = [i for i, name in entered if name == "Check"]
    # One poll = from a Check being entered to the next Check being entered; the first `polls` of them.
    span = events[check_idx[0] : check_idx[polls]]
    per_poll_events = len(span) / polls
    per_poll_transitions = sum(1 for e in span if e["type"].endswith("StateEntered")) / polls
    per_poll_lambda = sum(1 for e in span if e["type"] == "LambdaFunctionScheduled") / polls
    names: dict[str, int] = {}
    for _, name in entered:
        names[name] = names.get(name, 0) + 1
    virtual = sum(stack.clock.waits[waits_before:])
    invoked = [r for r in starts.records[first:] if r.function == CHECK_FN and r.event.get("key") == key]
    return {
        "status": described["status"],
        "polls_in_vain": polls,
        "check_invocations_dispatched": len(invoked),
        "states_entered": names,
        "history_events": len(events),
        "per_poll": {
            "lambda_invocations": per_poll_lambda,
            "state_transitions": per_poll_transitions,
            "history_events": per_poll_events,
            "states": sorted({name for name in (_entered_name(e) for e in span) if name}),
        },
        "virtual_seconds_waited": virtual,
        "wall_seconds": round(wall, 3),
        "check_ms_local": round(1000 * sum(r.seconds for r in invoked if r.seconds is not None) / max(1, len(invoked)), 3),
    }


def reaction_times(machine: PollingMachine, starts: "InvocationStarts", executions: int) -> dict[str, Any]:
    """``executions`` pollers side by side in real time (Wait states of a real interval), and the
    time from each one's decision being written to its NextStep starting.

    A decision that arrives at a random moment waits U(0, interval) for the next check. The bench
    samples that distribution stratified, whatever the machine's load: poller ``i`` gets its
    decision ``(i + 1/2) * interval / executions`` before its next check is due (the check's
    period measured from its own last two checks), so the waits are the midpoints of
    ``executions`` equal slices of the interval. The pollers start that far apart, too, to spread
    their checks over the interval.
    """
    from longstep_kit.local.serve import RealTime

    stack = machine.stack
    # Real Wait states: the virtual clock runs in real time (it does not skip), in fine ticks, so
    # the reaction is the wait for the next poll.
    ticker = RealTime(stack.clock, 1.0, tick_seconds=REAL_TIME_TICK_SECONDS)
    ticker.start()
    keys = [f"react-{i:02d}" for i in range(executions)]
    stagger = machine.interval_seconds / executions
    targets: dict[int, tuple[float, float]] = {}
    decided_at: dict[str, float] = {}

    def checks_of(key: str) -> list[float]:
        with starts._lock:
            return [r.start for r in starts.records if r.function == CHECK_FN and r.event.get("key") == key]

    try:
        t0 = time.perf_counter()
        arns = []
        for i, key in enumerate(keys):
            time.sleep(max(0.0, t0 + i * stagger - time.perf_counter()))
            arns.append(machine.start(key))
        pending = set(range(executions))
        deadline = time.monotonic() + 6 * machine.interval_seconds + 30
        while pending:
            now = time.perf_counter()
            for i in sorted(pending):
                if i not in targets:
                    seen = checks_of(keys[i])
                    if len(seen) >= 2:
                        period = seen[-1] - seen[-2]
                        target = seen[-1] + period - (i + 0.5) * stagger
                        while target < now + 0.01:  # too late for that check: aim at the one after
                            target += period
                        targets[i] = (target, period)
                elif now >= targets[i][0]:
                    decided_at[keys[i]] = time.perf_counter()
                    machine.decide(keys[i])
                    pending.discard(i)
            if time.monotonic() > deadline:
                raise RuntimeError(f"pollers {sorted(pending)} never got their decision")
            upcoming = [targets[i][0] for i in pending if i in targets]
            time.sleep(max(0.0005, min(0.01, min(upcoming, default=now + 0.01) - time.perf_counter())))
        outcomes = [machine.wait_done(arn, timeout=machine.interval_seconds * 4 + 30) for arn in arns]
    finally:
        ticker.stop()
        stack.clock.start()  # skipping again
    wall = time.perf_counter() - t0
    samples, overheads, periods, waits = [], [], [], []
    for i, key in enumerate(keys):
        with starts._lock:
            nxt = [r.start for r in starts.records if r.function == NEXT_FN and r.event.get("key") == key]
        last_check = max(c for c in checks_of(key) if c <= nxt[0])
        samples.append(nxt[0] - decided_at[key])
        waits.append(last_check - decided_at[key])  # the wait for the check that found it
        overheads.append(nxt[0] - last_check)  # that check -> NextStep starting
        periods.append(targets[i][1])
    return {
        "executions": executions,
        "statuses": sorted({o["status"] for o in outcomes}),
        "interval_seconds": machine.interval_seconds,
        "stagger_seconds": stagger,
        "planned_wait_seconds": [round((i + 0.5) * stagger, 4) for i in range(executions)],
        "samples_seconds": [round(x, 4) for x in samples],
        "wait_for_check_seconds": [round(x, 4) for x in waits],
        "check_to_next_step_seconds": [round(x, 4) for x in overheads],
        "poll_period_seconds": [round(x, 4) for x in periods],
        "wall_seconds": round(wall, 2),
    }


def extrapolate(per_poll: dict[str, float], wait_seconds: int, interval_seconds: int) -> dict[str, Any]:
    """A ``wait_seconds`` wait polled every ``interval_seconds``: polls, invocations, transitions, events."""
    polls = wait_seconds // interval_seconds
    return {
        "polls": polls,
        "lambda_invocations": round(polls * per_poll["lambda_invocations"]),
        "state_transitions": round(polls * per_poll["state_transitions"]),
        "history_events": round(polls * per_poll["history_events"]),
    }


@dataclass
class StartRecord:
    function: str
    handler: str
    event: Any
    start: float
    seconds: float | None = None


@dataclass
class InvocationStarts:
    """Records when each Lambda invocation *starts*, with the dispatcher's ``before_invoke`` and
    ``after_invoke`` hooks (the dispatcher's own records only keep durations)."""

    dispatcher: Any
    records: list[StartRecord] = field(default_factory=list)
    _open: dict[int, StartRecord] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def install(self) -> "InvocationStarts":
        self.dispatcher.before_invoke.append(self._started)
        self.dispatcher.after_invoke.append(self._ended)
        return self

    def uninstall(self) -> None:
        for hooks, hook in ((self.dispatcher.before_invoke, self._started), (self.dispatcher.after_invoke, self._ended)):
            if hook in hooks:
                hooks.remove(hook)

    def _started(self, invocation: Any) -> None:
        record = StartRecord(function=invocation.function, handler=invocation.handler, event=invocation.event, start=time.perf_counter())
        with self._lock:
            self.records.append(record)
            self._open[id(invocation)] = record

    def _ended(self, invocation: Any) -> None:
        with self._lock:
            record = self._open.pop(id(invocation), None)
        if record is not None:
            record.seconds = time.perf_counter() - record.start

    def first_after(self, t: float) -> StartRecord | None:
        with self._lock:
            later = [r for r in self.records if r.start >= t]
        return min(later, key=lambda r: r.start) if later else None

    def between(self, t0: float, t1: float) -> list[StartRecord]:
        with self._lock:
            return [r for r in self.records if t0 < r.start < t1]
