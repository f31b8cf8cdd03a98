"""What a run used: state transitions, Lambda invocations and time, request units, tokens."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Callable

from longstep import keys
from longstep.humans.table import PENDING as APPROVAL_PENDING
from longstep_kit.ops.views.history import STEP_STATES, Attempt
from longstep_kit.ops.views.records import PARKED_PREFIXES, WAITING_RECORD_STATUSES, json_value, offloaded_bytes

# Items read by point reads (GetItem, BatchGetItem; strongly consistent) one invocation of each
# task makes, as longstep.tasks does: ModelTurn reads the run record (its step's claim, a
# conditional put, hands back a recorded step without a read); CallTool reads the run record and
# the turn's model reply in one BatchGetItem; RequestApproval reads the reply, the record naming
# its request and the request; Escalate the reply (of a tool call) and the parked record;
# WaitForEvent the reply; Finish and ContinueAsNew the run record; Init (a new run) nothing.
GET_ITEMS_PER_INVOCATION = {
    "Init": 0,
    "ModelTurn": 1,
    "CallTool": 2,
    "CallOneTool": 2,
    "RequestApproval": 3,
    "WaitForEvent": 1,
    "EscalateModelTurn": 1,
    "EscalateCallTool": 2,
    "EscalateCallOneTool": 2,
    "Finish": 1,
    "ContinueAsNew": 1,
}
# Writes of one approval request in the approvals table: created, marked notified, decided.
APPROVAL_REQUEST_WRITES = 3
_READ_UNIT_BYTES = 4096  # strongly consistent read: 1 RRU per 4 KB
_WRITE_UNIT_BYTES = 1024  # 1 WRU per 1 KB


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
    the claim of each recorded step (its record is its lock: ``longstep.claims``): one unit when
    claimed, the result then written into the claim at the record's size (counted above), and
    one unit per failed attempt. ``dynamodb_read_units``: the point reads each invocation makes
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


def count_usage(
    records: dict[str, dict[str, Any]],
    sizes: dict[str, int],
    steps: dict[str, Any],
    attempts: list[Attempt],
    requests: list[dict[str, Any]],
    transitions: int,
    executions: int,
    memory_mb: Callable[[str], int] | None,
) -> Usage:
    """A run's usage, as :class:`Usage` documents it.

    Args:
        records: the run's records as plain values, by sort key.
        sizes: each record's size in bytes, by sort key.
        steps: each recorded step's result, by sort key.
        attempts: the invocations in the run's histories.
        requests: the run's approval requests.
        transitions: the ``*StateEntered`` events of the run's executions.
        executions: how many executions the run has had.
        memory_mb: a function's configured memory (by ARN), to count GB-seconds; None: not counted.
    """
    usage = Usage(executions=executions, state_transitions=transitions)
    usage.lambda_invocations = len(attempts)
    entries: dict[tuple[str, int], int] = {}
    for a in attempts:
        entries[(a.execution, a.entry)] = entries.get((a.execution, a.entry), 0) + 1
        usage.lambda_seconds += a.seconds or 0.0
        if memory_mb is not None and a.seconds:
            usage.lambda_gb_seconds += a.seconds * memory_mb(a.function) / 1024
    usage.retries = sum(n - 1 for n in entries.values())
    model = records.get(keys.RUN_RECORD, {}).get("model")
    choice = json_value(model) if isinstance(model, str) else model
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
            offloaded = offloaded_bytes(result)
            if offloaded:
                usage.s3_puts += 1
                usage.s3_bytes += offloaded
        before += sizes[sk]
    if any(a.state == "Finish" for a in attempts):
        usage.dynamodb_read_units += math.ceil(before / _READ_UNIT_BYTES)
    # writes: each record (parked ones twice), and each recorded step's claim before its result
    for sk, size in sizes.items():
        units = math.ceil(size / _WRITE_UNIT_BYTES)
        usage.dynamodb_write_units += units * _writes_of(sk, records[sk])
        usage.dynamodb_bytes += size
        if sk.startswith(keys.STEP_PREFIX) and sk in steps:
            usage.dynamodb_write_units += 1
    usage.dynamodb_write_units += sum(1 for a in attempts if a.state in STEP_STATES and not a.ok)
    usage.dynamodb_write_units += sum(APPROVAL_REQUEST_WRITES - (r["status"] == APPROVAL_PENDING) for r in requests)
    final = json_value(records.get(keys.FINAL_RECORD, {}).get("output"))
    if isinstance(final, dict) and final.get("output_ref"):
        usage.s3_puts += 1
        usage.s3_bytes += int(final["output_ref"].get("bytes", 0))
    return usage


def _writes_of(sk: str, record: dict[str, Any]) -> int:
    """How many times a record was written: once, or parked then answered (an escalation once
    per time it was parked)."""
    if not sk.startswith(PARKED_PREFIXES):
        return 1
    times = int(record.get("times", 1))
    answered = record.get("status") not in WAITING_RECORD_STATUSES and record.get("status") is not None
    return times + (times if answered else times - 1)
