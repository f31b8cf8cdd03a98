"""A small window of the local workflow driver, closed: it decides an approval in the dispatcher's
hook, and a decision whose ``SendTaskSuccess`` response was lost (the SDK's retry heard
``TaskTimedOut``) raised ``ApprovalExpiredError`` there and failed the run. On a stack of its own
(the release workflow's). The request itself was left ``expired`` (its decider heard TaskTimedOut)
though its decision reached the run: the run's resumed pass puts it back."""

from __future__ import annotations

from longstep_kit.local.faults import parse_fault
from longstep_kit.local.runner import RunOptions


def test_a_workflow_approval_whose_send_task_success_response_is_lost(release):
    """The local workflow driver decides in the dispatcher's hook; the lost response's retry heard
    TaskTimedOut, ``decide`` raised ApprovalExpiredError there, and the Approval state failed:
    the run FAILED. Now the driver says so and the run is the clean one."""
    from longstep_kit.local.stack import LocalStack
    from longstep_kit.local.workflow_run import run_workflow_scenario, stack_context

    with LocalStack(context=stack_context(release)) as local:
        clean = run_workflow_scenario(local, release, RunOptions(execution_name="release-clean", timeout_seconds=120))
        local.reset_data()
        lines: list[str] = []
        lost = run_workflow_scenario(
            local,
            release,
            RunOptions(execution_name="release-lost", faults=[parse_fault("lost_ack.SendTaskSuccess@1")], emit=lines.append, timeout_seconds=120),
        )
        statuses = _approval_statuses(local, lost["run_id"])
    assert [f["point"] for f in lost["faults_injected"]] == ["lost_ack.SendTaskSuccess"]
    assert lost["status"] == clean["status"] == "SUCCEEDED", lost.get("cause")
    assert lost["log_sha256"] == clean["log_sha256"] and lost["duplicate_effects"] == 0
    assert any("not decided" in line for line in lines)
    # Every request shows the decision that reached the run (the lost one stayed "expired").
    assert statuses and set(statuses) == {"approved"}, statuses


def _approval_statuses(local, run_id: str) -> list[str]:
    from longstep.humans.requests import run_approvals
    from longstep.humans.table import ApprovalTable
    from longstep.store import CheckpointStore

    table = ApprovalTable(local.outputs["ApprovalsTableName"], local.client("dynamodb"))
    store = CheckpointStore(local.outputs["CheckpointTableName"], local.client("dynamodb"))
    return [a["status"] for a in run_approvals(table, store, run_id)]
