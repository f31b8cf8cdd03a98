"""The report of a local run: status, output, counts of steps, effects, events and storage."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from longstep_kit.local.resources import agent_tables
from longstep_kit.local.stack import LocalStack
from longstep import keys
from longstep.transcript import correction_kinds, transcript
from longstep.messages import transcript_sha256
from longstep.codec import item_size
from longstep.store import CheckpointStore


def build_report(stack: LocalStack, run_id: str, execution_arns: list[str], first_invocation: int, wall_seconds: float) -> dict[str, Any]:
    """Gather the report of ``run_id`` from the executions, the tables and the invocations."""
    sfn = stack.client("stepfunctions")
    last = sfn.describe_execution(executionArn=execution_arns[-1])
    output = json.loads(last.get("output") or "{}")
    events = [e for arn in execution_arns for e in _history(sfn, arn)]
    store = CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))
    run = store.get(run_id, keys.RUN_RECORD)
    steps = store.steps(run_id)
    messages = transcript({"goal": run["goal"]}, steps) if run else []
    invocations = stack.dispatcher.invocations[first_invocation:]
    report: dict[str, Any] = {
        "run_id": run_id,
        "status": last["status"],
        "output": output.get("output"),
        "turns": sum(1 for s in steps if s.kind == "model"),
        "model_calls": _count(invocations, "model_turn"),
        "tool_calls": _count(invocations, "call_tool"),
        "effects": effects(stack, run_id),
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
        report["cause"] = last.get("cause")
    return report


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


def _history(sfn: Any, arn: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"executionArn": arn, "maxResults": 1000}
    while True:
        page = sfn.get_execution_history(**kwargs)
        events.extend(page["events"])
        if not page.get("nextToken"):
            return events
        kwargs["nextToken"] = page["nextToken"]


def _count(invocations: list[Any], task: str) -> dict[str, int]:
    counts = {"executed": 0, "replayed": 0}
    for inv in invocations:
        if inv.task != task or inv.error is not None:
            continue
        result = inv.result or {}
        if result.get("stop") == "max_turns":
            continue
        counts["replayed" if result.get("replayed") else "executed"] += 1
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


def effects(stack: LocalStack, run_id: str) -> dict[str, int]:
    """Physical effects of the run in the world tables, and how many of them were duplicates.

    A duplicate is a second outbox row for one idempotency key, a second ticket with the same
    title, or one ticket update applied twice under the same key.
    """
    ddb = stack.client("dynamodb")
    try:
        tables = agent_tables(stack, "triage")  # the sample's world (to be replaced by effect ledgers)
    except KeyError:  # another agent: its effects are not counted until agents declare ledgers
        return {"physical_sends": 0, "tickets_created": 0, "duplicate_effects": 0, "counted": False}
    sends = [i for i in _scan(ddb, tables["outbox"]) if i.get("run_id", {}).get("S") == run_id]
    tickets = _scan(ddb, tables["tickets"])
    created = [t for t in tickets if t.get("run_id", {}).get("S") == run_id]
    duplicates = sum(n - 1 for n in Counter(i["idempotency_key"]["S"] for i in sends).values())
    duplicates += sum(n - 1 for n in Counter(t["title"]["S"] for t in created).values())
    for ticket in tickets:
        log = [e["S"] for e in ticket.get("update_log", {}).get("L", []) if e["S"].startswith(f"{run_id}:")]
        duplicates += len(log) - len(set(log))
    return {"physical_sends": len(sends), "tickets_created": len(created), "duplicate_effects": duplicates}




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
