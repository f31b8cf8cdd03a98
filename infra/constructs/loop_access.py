"""What each of the loop's Lambda functions may do: the table its IAM grants are made from.

One row per function (by construct id); ``loop_grants`` turns each row into least-privilege
statements on the tables, the bucket, the key, the topic and the state machine. A row's comment
says which runtime code needs the access, so a grant and its reason change together.
"""

from __future__ import annotations

from dataclasses import dataclass

# DynamoDB actions by what the runtime does with them (longstep/store.py; LOCK_ACTIONS: Powertools'
# idempotency persistence, for a function given ``lock``: the loop's steps lock their own records).
# BatchGetItem: a repeated tool output is a reference to the record holding it (longstep.outputs),
# read with its holders when the Query did not bring them (CheckpointStore.resolve): every function
# that reads a run's tool records (the context, the run's steps) may need it.
_READ_RECORDS = ("dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:Query")
_WRITE_RECORDS = ("dynamodb:PutItem",)
_RENEW = ("dynamodb:UpdateItem",)
_RELEASE = ("dynamodb:DeleteItem",)  # a failed step's claim (longstep.claims.StepClaims.release_step)
# Appending to a run's event stream (longstep.events): read the log's end, put a batch after it.
EVENT_ACTIONS = ("dynamodb:Query", "dynamodb:PutItem")
LOCK_ACTIONS = ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem")
# Data-plane use of the customer-managed key by DynamoDB and S3 on a caller's behalf.
KEY_USE = ("kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey")


@dataclass(frozen=True)
class Access:
    """What one function's handler touches (longstep/tasks/); its role is granted exactly this.

    Attributes:
        checkpoints: DynamoDB actions on the checkpoint table.
        lock: takes the step lock (the idempotency table).
        read_objects: reads objects from the artifacts bucket (model scripts).
        write_objects: writes content-addressed artifacts (offloaded outputs, long answers).
        send_task_response: hands a recorded decision to a task token (SendTaskSuccess).
        send_task_failure: hands a child run's failure to its parent's task token (SendTaskFailure).
        start_execution: starts an execution of this state machine (continue-as-new, a child run).
        reads_execution: reads its own execution (which state machine version it runs).
        chooses_version: reads versions and the alias to choose the state machine version of the
            run's next execution (longstep.pinning).
        approvals: DynamoDB actions on the approvals table (longstep.humans.table).
        notify: publishes approval requests to the approvals topic.
        memory: DynamoDB actions on the long-term memory table (longstep/memory.py).
        emits_events: appends to the runs' event streams (``EVENT_ACTIONS`` on the checkpoint
            table); every task of the loop reports what it does.
    """

    checkpoints: tuple[str, ...]
    lock: bool = False
    read_objects: bool = False
    write_objects: bool = False
    send_task_response: bool = False
    send_task_failure: bool = False
    start_execution: bool = False
    reads_execution: bool = False
    chooses_version: bool = False
    approvals: tuple[str, ...] = ()
    notify: bool = False
    memory: tuple[str, ...] = ()
    emits_events: bool = True

    def checkpoint_actions(self) -> tuple[str, ...]:
        """The DynamoDB actions on the checkpoint table, the event stream's included."""
        return tuple(sorted(set(self.checkpoints) | (set(EVENT_ACTIONS) if self.emits_events else set())))


ACCESS = {
    # Reads the run's long-term memories once, into the run record; finds where a resumed run
    # stands from its latest snapshot, which may be offloaded to S3 (read_objects).
    "InitRun": Access(checkpoints=_READ_RECORDS + _WRITE_RECORDS, memory=("dynamodb:Query",), read_objects=True),
    # Writes a snapshot of the live context every few turns: a large one goes to S3 (write_objects).
    # UpdateItem: renews the TTL of a live run's records (longstep.tasks.common.keep_records), as
    # do WaitForEvent (before a long wait) and Finish (retention counted from the run's end); and
    # points the run record at each new snapshot (context.write_snapshot).
    # The step lock is the step's own record (longstep.claims): PutItem claims it, UpdateItem
    # writes the result into the claim, DeleteItem removes the claim of a step that failed; no
    # grant on the idempotency table.
    # A budget ask (longstep.humans.budget_asks) is a request in the approvals table, like any
    # approval: PutItem lists it, GetItem reads its decision, UpdateItem marks it notified or
    # expires it at the limit; approvers hear of it on the topic (notify).
    "ModelTurn": Access(
        checkpoints=_READ_RECORDS + _WRITE_RECORDS + _RENEW + _RELEASE,
        read_objects=True,
        write_objects=True,
        approvals=("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"),
        notify=True,
    ),
    # BatchGetItem: the run record and the turn's reply in one request (tasks.common.load_run_and_call);
    # PutItem, UpdateItem and DeleteItem: the step's claim, its result, a failed step's claim removed
    # (longstep.claims); DeleteItem also: a human's "it did not happen" clears an at-most-once call's intent marker;
    # approvals UpdateItem: a timed-out approval request is marked expired.
    "CallTool": Access(
        checkpoints=("dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:UpdateItem"),
        read_objects=True,  # read_artifact: pages of an offloaded output
        write_objects=True,
        approvals=("dynamodb:UpdateItem",),
        memory=("dynamodb:PutItem", "dynamodb:Query"),  # remember / recall
    ),
    # An eval run's CallTool (longstep.evals, docs/evals.md): its own step records as CallTool's, and
    # nothing that acts: no approvals table (an eval run asks nobody), recall without remember; the
    # agent's declarations are given read-only (AgentResources.bind_reads).
    "CallToolEval": Access(
        checkpoints=("dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:UpdateItem"),
        read_objects=True,  # the eval's record of calls; read_artifact
        write_objects=True,  # a large result of a read run live is offloaded, as in any run
        memory=("dynamodb:Query",),  # recall
    ),
    # A wait_for event wait parks its token, or takes a signal that arrived first.
    "WaitForEvent": Access(checkpoints=("dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:Query"), send_task_response=True),
    # The checkpoint record names the request; the request itself is an item of the approvals table.
    "RequestApproval": Access(
        checkpoints=("dynamodb:GetItem", "dynamodb:PutItem"),
        send_task_response=True,
        approvals=("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"),
        notify=True,
    ),
    # Query and UpdateItem: the run's tokens so far, and its runs-index record (longstep.runs_index).
    "Escalate": Access(checkpoints=("dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem")),
    # Reads the run record and the reply's wait_for call, then the agent's world (its resources).
    # UpdateItem: counts the execution's checks on the run record, and what a handed-over wait waited.
    # A long-running MCP call (longstep.mcp.tasks): PutItem writes its task record before the call,
    # and a large final result is offloaded to S3 before it travels in the state.
    "CheckCondition": Access(checkpoints=("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"), write_objects=True),
    # Reads the run record to hand the run to a fresh execution of this state machine.
    "ContinueAsNew": Access(checkpoints=("dynamodb:GetItem",), start_execution=True, reads_execution=True, chooses_version=True),
    # Renews the run's records' TTL at the end (_RENEW). A subagent's run answers its parent's waiting call: UpdateItem records the outcome in the
    # parent's record of the call, whose task token it then answers.
    # ...and expires its pending budget ask's request (longstep.humans.budget_asks.close_asks).
    "Finish": Access(
        checkpoints=_READ_RECORDS + _WRITE_RECORDS + _RENEW,
        write_objects=True,
        send_task_response=True,
        send_task_failure=True,
        approvals=("dynamodb:UpdateItem",),
    ),
    # Starts a delegated call's child run (an execution of this state machine) and parks the
    # call's token in the parent's record of it; hands over a child's outcome recorded first.
    "DelegateToSubagent": Access(
        checkpoints=("dynamodb:GetItem", "dynamodb:Query", "dynamodb:UpdateItem"),
        start_execution=True,
        reads_execution=True,  # the child runs on its parent's state machine version
        send_task_response=True,
        send_task_failure=True,
    ),
    # A paused run keeps its Pause task's token on the run record (UpdateItem), or hands it back at
    # once when it was resumed meanwhile; a long pause renews the run's records' TTL (Query, UpdateItem).
    "Pause": Access(checkpoints=("dynamodb:GetItem", "dynamodb:Query", "dynamodb:UpdateItem"), send_task_response=True),
    # The fleet's states (longstep.tasks.fleet_gate; deployed only with fleet settings): the run record
    # (its key, its model), a key's slot items changed by transactions (Put, Update, Delete) and
    # read back (GetItem, Query), a model's token bucket (UpdateItem); it wakes the next waiter's
    # token and reads a refused waiter's or a full key's holder's execution (loop_fleet.grant_fleet).
    "FleetGate": Access(
        checkpoints=("dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"),
        send_task_response=True,
        approvals=("dynamodb:UpdateItem",),  # an ended run's pending budget ask expires (close_asks)
    ),
    # An aborted child run records its failure in its parent's record of the call and answers the token.
    "ChildFailed": Access(checkpoints=("dynamodb:GetItem", "dynamodb:UpdateItem"), send_task_response=True, send_task_failure=True),
}


def access_of(function_name: str) -> Access:
    """The access of a function by its name (``CallTool-<agent>`` has CallTool's)."""
    return ACCESS[function_name.partition("-")[0]]
