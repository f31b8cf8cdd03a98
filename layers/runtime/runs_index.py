"""The runs index: where each run stands, kept by the runtime so a fleet is queried, not scanned.

Each run has an ``index`` record in the checkpoint table (agent, tenant, tags, code version,
parent, status, error, tokens, generation) and one facet record per value it is selected by
(``index#tenant``, ``index#agent``, ``index#parent``, ``index#tag#<tag>``). The index record's
facet is its status, so it moves between the ``status#...`` partitions of the checkpoint table's
sparse ``runs_by_facet`` index as the run goes on; the facet records never change. A query reads
one partition of that index (``longstep_kit.ops.fleet_query``), never every execution.

The tasks write it at the transitions they see: Init (``running``), Escalate (``escalated``, with
the step's error name), Finish (``succeeded`` or ``stopped``, with the run's tokens) and
ChildFailed (``failed``). A run that fails without a task seeing it (an escalation nobody
answered, an abort from outside) stays ``running`` or ``escalated`` here until a query settles it
from its execution (``settle``): the open statuses are always checked against Step Functions.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from longstep import clock, keys, run_status
from longstep.contract.run import RunRecord
from longstep.store import Condition, StepStore

# The statuses the index records: those of ``longstep.run_status`` its tasks see (``RECORDED``).
RUNNING, ESCALATED, SUCCEEDED, STOPPED, FAILED, TIMED_OUT, ABORTED = (
    run_status.RUNNING,
    run_status.ESCALATED,
    run_status.SUCCEEDED,
    run_status.STOPPED,
    run_status.FAILED,
    run_status.TIMED_OUT,
    run_status.ABORTED,
)
STATUSES = run_status.RECORDED
# What the runtime last saw may be out of date for these: a query checks them against the execution.
OPEN_STATUSES = (RUNNING, ESCALATED)
# A failed execution's status (Step Functions) -> the index's.
EXECUTION_ENDS = {"FAILED": FAILED, "TIMED_OUT": TIMED_OUT, "ABORTED": ABORTED}
STATUS_ATTRIBUTE = "status"


def on_start(store: StepStore, run_id: str, run: Mapping[str, Any], generation: int, resumed: bool) -> None:
    """Init: the run is running (again). A new run gets its index and facet records; a resumed
    one keeps them and its counts (written again when missing: a crash between the run record and
    its index)."""
    now = clock.now()
    existing = store.get(run_id, keys.RUN_INDEX_RECORD) if resumed else None
    if existing is not None:
        # A put of the record read (Init holds no UpdateItem grant): nothing else writes it while
        # a new execution starts but a settling query, which is conditional on what it read.
        kept = {k: v for k, v in existing.items() if k not in ("pk", "sk", "error", "failure", keys.checkpoint_table().ttl_attribute)}
        kept.update(
            {STATUS_ATTRIBUTE: RUNNING, keys.RUNS_FACET_ATTRIBUTE: keys.run_facet("status", RUNNING), "generation": generation, "updated_at": now}
        )
        store.put(run_id, keys.RUN_INDEX_RECORD, kept)
        return
    record_of = RunRecord.of(run)
    created = record_of.created_at or now
    order = keys.run_order(created, run_id)
    parent = record_of.parent
    record = {
        "run_id": run_id,
        "agent": record_of.agent,
        "tenant": record_of.tenant,
        "tags": record_of.tags,
        "parent": None if parent is None else parent.run_id,
        "code_version": record_of.code_version,
        "model_id": _model_id(record_of.model),
        "created_at": created,
        "updated_at": now,
        "generation": generation,
        STATUS_ATTRIBUTE: RUNNING,
        keys.RUNS_FACET_ATTRIBUTE: keys.run_facet("status", RUNNING),
        keys.RUNS_ORDER_ATTRIBUTE: order,
    }
    store.put(run_id, keys.RUN_INDEX_RECORD, {k: v for k, v in record.items() if v is not None})
    for sk, facet in facets(run_id, run):
        store.put(run_id, sk, {keys.RUNS_FACET_ATTRIBUTE: facet, keys.RUNS_ORDER_ATTRIBUTE: order, "run_id": run_id})


def facets(run_id: str, run: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(sort key, ix_facet)`` of each facet record of a run (its status is on the index record)."""
    record = RunRecord.of(run)
    out = [(f"{keys.RUN_FACET_PREFIX}agent", keys.run_facet("agent", record.agent))]
    if record.tenant:
        out.append((f"{keys.RUN_FACET_PREFIX}tenant", keys.run_facet("tenant", record.tenant)))
    if record.parent is not None:
        out.append((f"{keys.RUN_FACET_PREFIX}parent", keys.run_facet("parent", record.parent.run_id)))
    out += [(f"{keys.RUN_FACET_PREFIX}tag#{tag}", keys.run_facet("tag", tag)) for tag in record.tags]
    return out


def on_status(store: StepStore, run_id: str, status: str, *, error: str | None = None, counts: Mapping[str, Any] | None = None) -> bool:
    """A transition the runtime saw: the index record moves to ``status``'s partition.

    Args:
        error: the error name that led here (an escalated step's, a failed execution's).
        counts: what the run used so far (``input_tokens``, ``output_tokens``, ``turns``).

    Returns:
        False when the run has no index record (a run started before the index existed).
    """
    values: dict[str, Any] = {STATUS_ATTRIBUTE: status, keys.RUNS_FACET_ATTRIBUTE: keys.run_facet("status", status), "updated_at": clock.now()}
    if error is not None:
        values["error"] = error
    values.update(counts or {})
    return store.update(run_id, keys.RUN_INDEX_RECORD, values, when=Condition(exists=True)) is not None


def settle(store: StepStore, run_id: str, seen: Mapping[str, Any], execution_status: str, error: str | None) -> str | None:
    """Record that the run's latest execution ended without a task seeing it (``EXECUTION_ENDS``).

    Conditional on the index record being as ``seen`` (status and generation): a run resumed
    meanwhile keeps its new status. Returns the status written, or None.
    """
    status = EXECUTION_ENDS.get(execution_status)
    if status is None:
        return None
    values: dict[str, Any] = {STATUS_ATTRIBUTE: status, keys.RUNS_FACET_ATTRIBUTE: keys.run_facet("status", status), "updated_at": clock.now()}
    if error and not seen.get("error"):  # the escalated step's error says more than EscalationTimedOut
        values["error"] = error
    if error:
        values["failure"] = error
    when = Condition(exists=True, equal={STATUS_ATTRIBUTE: seen.get(STATUS_ATTRIBUTE), "generation": seen.get("generation", 0)})
    return status if store.update(run_id, keys.RUN_INDEX_RECORD, values, when=when) is not None else None


def token_counts(steps: list[Any]) -> dict[str, int]:
    """The tokens and turns of a run's recorded model steps (``StepRecord``s)."""
    counts = {"input_tokens": 0, "output_tokens": 0, "turns": 0}
    for step in steps:
        if step.kind != keys.MODEL:
            continue
        usage = (step.result or {}).get("usage") or {}
        counts["input_tokens"] += int(usage.get("inputTokens", 0))
        counts["output_tokens"] += int(usage.get("outputTokens", 0))
        counts["turns"] += 1
    return counts


def _model_id(model: Any) -> str | None:
    if isinstance(model, str):
        model = json.loads(model)
    if not isinstance(model, dict):
        return None
    return model.get("model_id") or model.get("provider")
