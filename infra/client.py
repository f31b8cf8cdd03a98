"""A Python client for a deployed Longstep stack (or a local server): start runs, follow their events,
steer them and decide their approvals, for teams that build their own UI.

    from longstep_kit.client import Client

    client = Client.for_stack("Longstep")                      # the caller's AWS credentials
    client.start({"run_id": "triage-001", "agent": "triage", "goal": "..."})
    for event in client.follow("triage-001"):                  # until the run ends
        print(event["offset"], event["type"])
    client.send("triage-001", "also look at BUG-103")

Everything goes through the stack's own APIs with the caller's IAM identity: Step Functions for
executions and task tokens, DynamoDB for the run's records and its event stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from longstep.events import EventLog
from longstep.humans.table import ApprovalTable
from longstep.store import CheckpointStore
from longstep_kit.ops import live, runs
from longstep_kit.ops.steer import REJECT, Steering


@dataclass
class Client:
    """One stack's runs, through the given boto3 clients.

    Args:
        sfn: a Step Functions client.
        dynamodb: a DynamoDB client.
        state_machine_arn: the stack's agent state machine (``StateMachineArn`` output).
        checkpoint_table: the stack's checkpoint table (``CheckpointTableName``).
        approvals_table: the stack's approvals table (``ApprovalsTableName``; None: no approvals).
        who: recorded as the sender of messages and the approver of decisions.
    """

    sfn: Any
    dynamodb: Any
    state_machine_arn: str
    checkpoint_table: str
    approvals_table: str | None = None
    who: str = "client"

    @classmethod
    def for_stack(cls, stack: str = "Longstep", session: Any = None, endpoint_url: str | None = None, who: str = "client") -> "Client":
        """The client of the deployed stack named ``stack`` (its outputs read from CloudFormation)."""
        import boto3

        session = session or boto3.Session()
        make = lambda service: session.client(service, endpoint_url=endpoint_url)  # noqa: E731
        described = make("cloudformation").describe_stacks(StackName=stack)["Stacks"][0]
        outputs = {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}
        return cls(
            make("stepfunctions"),
            make("dynamodb"),
            outputs["StateMachineArn"],
            outputs["CheckpointTableName"],
            outputs.get("ApprovalsTableName"),
            who,
        )

    @property
    def _store(self) -> CheckpointStore:
        return CheckpointStore(self.checkpoint_table, self.dynamodb)

    @property
    def _steering(self) -> Steering:
        approvals = ApprovalTable(self.approvals_table, self.dynamodb) if self.approvals_table else None
        return Steering(self._store, self.sfn, self.state_machine_arn, approvals, self.who)

    def start(self, payload: dict[str, Any], if_running: str = REJECT) -> str:
        """Start a run (on the alias ``live``); a running run id follows ``if_running`` (``reject``,
        ``enqueue`` or ``interrupt``). Returns the execution ARN, ``enqueued`` or ``interrupted``."""
        return self._steering.start(payload, if_running)

    def status(self, run_id: str) -> str:
        """The status of the run's latest execution (``RUNNING``, ``SUCCEEDED``, ``FAILED``...)."""
        return runs.latest_execution(self.sfn, self.state_machine_arn, run_id)["status"]

    def events(self, run_id: str, after: int = -1) -> list[dict[str, Any]]:
        """The run's events recorded so far after offset ``after``."""
        return EventLog(self._store).read(run_id, after)

    def follow(self, run_id: str, after: int = -1, poll_seconds: float = live.POLL_SECONDS) -> Iterator[dict[str, Any]]:
        """The run's events after ``after`` as they happen, until it ends (resume a dropped follow
        with the last offset you got)."""
        return live.follow(EventLog(self._store), run_id, lambda: self.status(run_id), after, poll_seconds)

    def send(self, run_id: str, text: str) -> int:
        """Queue a message for the run's next model turn; returns its place in the inbox."""
        return self._steering.send(run_id, text)

    def pause(self, run_id: str) -> bool:
        """Pause the run at its next model turn (no compute while paused)."""
        return self._steering.pause(run_id)

    def resume(self, run_id: str, force: bool = False) -> str:
        """Continue a paused run, or restart a failed or stopped one."""
        return self._steering.resume(run_id, force)

    def stop(self, run_id: str, reason: str = "stopped by the user") -> list[str]:
        """Stop the run (and its children) at the next step boundary."""
        return self._steering.stop(run_id, reason)

    def approvals(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """Pending approval requests (of one run when given), without their task tokens."""
        from longstep.humans.requests import pending_approvals

        return pending_approvals(ApprovalTable(self._require_approvals(), self.dynamodb), run_id)

    def decide(self, approval_id: str, decision: str, reason: str | None = None, edited_input: dict[str, Any] | None = None) -> dict[str, Any]:
        """Approve, reject (with a reason) or edit (with the arguments to run) a pending request."""
        from longstep.humans.decisions import Decision, decide

        table = ApprovalTable(self._require_approvals(), self.dynamodb)
        return decide(table, self.sfn, approval_id, Decision(decision=decision, reason=reason, input=edited_input, approver=self.who))

    def _require_approvals(self) -> str:
        if not self.approvals_table:
            raise ValueError("approvals_table: this client was made without the stack's approvals table")
        return self.approvals_table


__all__ = ["Client"]
