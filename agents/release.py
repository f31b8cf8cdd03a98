"""The sample release workflow: build -> the triage agent on the build's failures -> approval ->
publish -> wait two days -> follow-up (with ``smoke_tests`` in the input, it also waits for the
smoke-test job's signal after publishing).

A workflow is code, executed by replay (docs/workflows.md): each step runs once and its result
is recorded; a crash or a redeploy replays the record instead of running the step again; the
triage agent's child run, the approval and the two-day wait hold no compute. Each step writes
one entry to the release ledger (a table the workflow declares), so a duplicate effect would
show there; the triage agent's tickets are in its own ledger.

Registered in cdk.json: ``"workflows": {"release": "agents.release:build"}``; the triage agent
must be deployed beside it (``"agents": {"triage": "agents.triage:build"}``).
"""

from __future__ import annotations

import uuid
from typing import Any

from longstep import StepFailedError, StepInfo, Table, Workflow, WorkflowContext, clients

# One item per effect: build and follow-up entries are keyed (a re-run overwrites its own item),
# a publish entry gets a fresh id each time (the registry cannot tell two publishes apart).
LEDGER = Table("release_ledger", partition_key="entry_id", actions=("dynamodb:PutItem", "dynamodb:GetItem"))


def _ledger_put(entry_id: str, kind: str, **attrs: str) -> None:
    item = {"entry_id": {"S": entry_id}, "kind": {"S": kind}, **{k: {"S": v} for k, v in attrs.items()}}
    clients.client("dynamodb").put_item(TableName=LEDGER.table_name, Item=item)


def build_artifact(args: dict[str, Any], info: StepInfo) -> dict[str, Any]:
    """Build the release (keyed: the build system dedups on the step's idempotency key)."""
    artifact = f"{args['service']}-{args['version']}.tar.gz"
    _ledger_put(f"build:{info.idempotency_key}", "build", artifact=artifact)
    return {"artifact": artifact, "tests_failed": list(args.get("failing_tests", []))}


def publish(args: dict[str, Any], info: StepInfo) -> dict[str, Any]:
    """Publish the artifact (at most once: nothing downstream deduplicates a publish)."""
    _ledger_put(f"publish:{uuid.uuid4()}", "publish", artifact=args["artifact"], key=info.idempotency_key)
    return {"published": args["artifact"]}


def follow_up_done(args: dict[str, Any], info: StepInfo) -> dict[str, Any] | None:
    """Whether the follow-up note was already filed (the check of check-then-act)."""
    found = clients.client("dynamodb").get_item(TableName=LEDGER.table_name, Key={"entry_id": {"S": f"followup:{args['version']}"}})
    return {"note": found["Item"]["note"]["S"]} if "Item" in found else None


def follow_up(args: dict[str, Any], info: StepInfo) -> dict[str, Any]:
    """File the two-days-after note (check-then-act: the check above finds a note filed before)."""
    note = f"{args['service']} {args['version']}: two days in production, no rollback"
    _ledger_put(f"followup:{args['version']}", "followup", note=note)
    return {"note": note}


def release(ctx: WorkflowContext, request: dict[str, Any]) -> dict[str, Any]:
    """The workflow: branch only on what the context returns (docs/workflows.md)."""
    started = ctx.now()
    built = ctx.step(
        build_artifact,
        {"service": request["service"], "version": request["version"], "failing_tests": request.get("failing_tests", [])},
        effect="keyed",
    )
    details = {"service": request["service"], "version": request["version"], "artifact": built["artifact"]}
    if built["tests_failed"]:  # a child agent run looks into them; the approver reads its verdict
        try:
            triage = ctx.agent(
                "triage",
                f"The release build of {request['service']} {request['version']} has failing tests. Find out whether they block the "
                "release, file a ticket for each real problem, and finish with a summary and a verdict.",
                failing_tests=built["tests_failed"],
            )
            details["triage"] = triage["output"]
        except StepFailedError as exc:  # recorded like a result: the approver decides without a verdict
            details["triage"] = f"no verdict: {exc.message or exc.error_type}"
    decision = ctx.approval("publish", details)
    if decision["decision"] not in ("approve", "edit"):
        return {"status": "not released", "reason": decision.get("reason") or decision["decision"]}
    published = ctx.step(publish, {"artifact": built["artifact"]}, effect="at_most_once")
    if request.get("smoke_tests"):  # the smoke-test job signals the run (approval API or `longstep signal`)
        smoke = ctx.wait_for("smoke-tests", match={"version": request["version"]}, timeout_seconds=3600)
        if smoke is None or not smoke.get("ok"):
            return {
                "status": "published, rollback advised",
                "published": published["published"],
                "reason": "no smoke-test report within an hour" if smoke is None else smoke.get("detail", "smoke tests failed"),
            }
    ctx.sleep(days=2)
    note = ctx.step(follow_up, {"service": request["service"], "version": request["version"]}, effect="check_then_act", check=follow_up_done)
    return {"status": "released", "published": published["published"], "note": note["note"], "started_at": started}


def build() -> Workflow:
    """The release workflow, as cdk.json registers it."""
    return Workflow(release, resources=(LEDGER,), description="build, triage failures, approve, publish, follow up two days later")
