"""The report of a local run: status, output, counts of steps, effects, events and storage."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from longstep_kit.local.stack import LocalStack
from longstep_kit.ops.views.history import execution_history
from longstep import keys
from longstep.contract.run import RunRecord
from longstep.transcript import correction_kinds, transcript
from longstep.messages import transcript_sha256
from longstep.codec import item_size
from longstep.store import CheckpointStore


def build_report(stack: LocalStack, run_id: str, execution_arns: list[str], first_invocation: int, wall_seconds: float) -> dict[str, Any]:
    """Gather the report of ``run_id`` from the executions, the tables and the invocations."""
    sfn = stack.client("stepfunctions")
    last = sfn.describe_execution(executionArn=execution_arns[-1])
    output = json.loads(last.get("output") or "{}")
    events = [e for arn in execution_arns for e in execution_history(sfn, arn)]
    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
    stored = store.get(run_id, keys.RUN_RECORD)
    run = None if stored is None else RunRecord.from_dict(stored)
    steps = store.steps(run_id)
    messages = transcript(run, steps) if run else []
    invocations = stack.dispatcher.invocations[first_invocation:]
    report: dict[str, Any] = {
        "run_id": run_id,
        "status": last["status"],
        "output": output.get("output"),
        "turns": sum(1 for s in steps if s.kind == "model"),
        "model_calls": _count(invocations, "model_turn"),
        "tool_calls": _count(invocations, "call_tool"),
        "effects": effects(stack, run_id, run.agent if run else None),
        "transcript_sha256": transcript_sha256(messages),
        "lambda_invocations": len(invocations),
        "state_transitions": sum(1 for e in events if e["type"].endswith("StateEntered")),
        "history_events": len(events),
        "storage": storage(stack),
        "wall_seconds": round(wall_seconds, 3),
    }
    report["escalations"] = escalations(store, run_id)
    report["approvals"] = approvals(stack, store, run_id)
    kinds = correction_kinds(steps, report["turns"])
    report["corrections"] = {"model": kinds.count("model"), "semantic": kinds.count("semantic")}
    if last["status"] != "SUCCEEDED":
        report["error"] = last.get("error")
        report["cause"] = aborted_cause(report, last.get("cause"))
    return report


# Who answers for a local run (``longstep.humans`` resolvers): ``local-auto``, ``local-reject``...
# are the local answerer (``--approve``), not a person; ``local-interactive`` is the person at the terminal.
LOCAL_ANSWERER_PREFIX, LOCAL_PERSON = "local-", "local-interactive"


def aborted_cause(report: dict[str, Any], cause: Any) -> Any:
    """The failed run's cause, saying who aborted it when the local answerer did (the state
    machine's cause says a human did: on AWS only a person answers an escalation)."""
    resolvers = {
        (e.get("resolution") or {}).get("resolver") for e in report.get("escalations", []) if (e.get("resolution") or {}).get("action") == "abort"
    }
    local = sorted(r for r in resolvers if r and r.startswith(LOCAL_ANSWERER_PREFIX) and r != LOCAL_PERSON)
    if report.get("error") == "EscalationAborted" and local:
        return f"the local run's answerer ({', '.join(local)}, not a person) aborted the run at an escalation"
    return cause


def escalations(store: CheckpointStore, run_id: str) -> list[dict[str, Any]]:
    """Every escalation of the run: where, why, and how a human answered."""
    out = []
    for item in store.query_prefix(run_id, "escalation#"):
        key = keys.parse(item["sk"])
        out.append(
            {
                "turn": key.turn,
                "call": None if key.call < 0 else key.call,
                "task": item.get("task"),
                "error": item.get("error"),
                "reason": item.get("reason"),
                "times": int(item.get("times", 1)),
                "resolution": json.loads(item["decision"]) if item.get("decision") else None,
            }
        )
    return out


def approvals(stack: LocalStack, store: CheckpointStore, run_id: str) -> list[dict[str, Any]]:
    """Every approval request of the run: which call, its status, and who decided what."""
    from longstep.humans.requests import run_approvals
    from longstep.humans.table import ApprovalTable

    table = ApprovalTable(stack.outputs["ApprovalsTableName"], stack.client("dynamodb"))
    return [
        {k: request[k] for k in ("approval_id", "turn", "call", "tool", "status", "decision", "approver")}
        for request in run_approvals(table, store, run_id)
    ]


def _count(invocations: list[Any], task: str) -> dict[str, int]:
    counts = {"executed": 0, "replayed": 0}
    for inv in invocations:
        if inv.task != task or inv.error is not None:
            continue
        result = inv.result or {}
        if result.get("stop") == "max_turns":
            continue
        counts["replayed" if result.get("replayed") else "executed"] += 1
    if task == "call_tool":  # and the calls a ModelTurn ran inline (longstep.tasks.inline_tools)
        for inv in invocations:
            result = inv.result if inv.task == "model_turn" and inv.error is None and isinstance(inv.result, dict) else {}
            if result.get("route") == "inline":
                counts["replayed"] += result["inline_replayed"]
                counts["executed"] += len(result["calls"]) - result["inline_replayed"]
    return counts


def _scan(ddb: Any, table: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": table}
    while True:
        page = ddb.scan(**kwargs)
        items.extend(page.get("Items", []))
        if "LastEvaluatedKey" not in page:
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def effects(stack: LocalStack, run_id: str, agent: str | None) -> dict[str, Any]:
    """The run's effects as the agent's tools list them in their ledgers, and the duplicates.

    A duplicate is a second effect under one idempotency key (a key is ``run_id:turn:call``: one
    tool call). Tools that can act but declare no ledger are named under ``not_counted``.
    """
    from longstep.tools.builtins import builtin_tools
    from longstep.tools.registry import Effect
    from longstep_kit.local.world import agent_context

    builtins = {t.name for t in builtin_tools()}  # the runtime's own (memory is keyed by the fact's key)

    by_tool: dict[str, int] = {}
    duplicates: dict[str, dict[str, int]] = {}
    not_counted: list[str] = []
    if agent is None:  # no run record: the run never started, so it made no effects
        return {"by_tool": by_tool, "duplicate_effects": 0, "duplicates": duplicates, "not_counted": not_counted}
    with agent_context(stack, agent) as built:
        for name in sorted(built.tools.tools):
            item = built.tools.tools[name]
            if item.ledger is None:
                if item.effect is not Effect.READ and name not in builtins:
                    not_counted.append(name)
                continue
            keys_seen = Counter(entry.idempotency_key for entry in item.ledger(run_id) if entry.run_id == run_id)
            by_tool[name] = sum(keys_seen.values())
            repeated = {key: n for key, n in sorted(keys_seen.items()) if n > 1}
            if repeated:
                duplicates[name] = repeated
    return {
        "by_tool": by_tool,
        "duplicate_effects": sum(n - 1 for repeated in duplicates.values() for n in repeated.values()),
        "duplicates": duplicates,
        "not_counted": not_counted,
    }


def storage(stack: LocalStack) -> dict[str, int]:
    """Bytes and items stored by the durable layer: checkpoints, locks and artifacts."""
    ddb, s3 = stack.client("dynamodb"), stack.client("s3")
    items = _scan(ddb, stack.outputs["CheckpointTableName"]) + _scan(ddb, stack.outputs["IdempotencyTableName"])
    objects = s3.list_objects_v2(Bucket=stack.outputs["ArtifactBucketName"]).get("Contents", [])
    return {
        "dynamodb_bytes": sum(item_size(i) for i in items),
        "s3_bytes": sum(o["Size"] for o in objects),
        "items": len(items) + len(objects),
    }
