"""Table key schemas: the single definition used by the CDK stack, the runtime and the tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class IndexSchema:
    """A global secondary index of a table.

    Attributes:
        name: the index name.
        partition_key: name of the string partition key.
        sort_key: name of the string sort key, or None.
        projected: the non-key attributes the index holds (``INCLUDE``); None projects them all.
    """

    name: str
    partition_key: str
    sort_key: str | None = None
    projected: tuple[str, ...] | None = None

    def key_schema(self) -> list[dict[str, str]]:
        """The index's ``KeySchema``."""
        schema = [{"AttributeName": self.partition_key, "KeyType": "HASH"}]
        if self.sort_key:
            schema.append({"AttributeName": self.sort_key, "KeyType": "RANGE"})
        return schema

    def projection(self) -> dict[str, Any]:
        """The index's ``Projection``."""
        if self.projected is None:
            return {"ProjectionType": "ALL"}
        return {"ProjectionType": "INCLUDE", "NonKeyAttributes": list(self.projected)}


@dataclass(frozen=True)
class TableSchema:
    """Key layout of one DynamoDB table.

    Attributes:
        partition_key: name of the string partition key.
        sort_key: name of the string sort key, or None for a hash-only table.
        ttl_attribute: the attribute DynamoDB TTL reads (epoch seconds), or None.
        indexes: its global secondary indexes.
    """

    partition_key: str
    sort_key: str | None = None
    ttl_attribute: str | None = None
    indexes: tuple[IndexSchema, ...] = ()

    def key_schema(self) -> list[dict[str, str]]:
        """The ``KeySchema`` argument of DynamoDB ``CreateTable``."""
        schema = [{"AttributeName": self.partition_key, "KeyType": "HASH"}]
        if self.sort_key:
            schema.append({"AttributeName": self.sort_key, "KeyType": "RANGE"})
        return schema

    def attribute_definitions(self) -> list[dict[str, str]]:
        """The ``AttributeDefinitions`` argument of DynamoDB ``CreateTable`` (all keys are strings),
        the indexes' keys included."""
        names = [k["AttributeName"] for k in self.key_schema()]
        for index in self.indexes:
            names += [k["AttributeName"] for k in index.key_schema() if k["AttributeName"] not in names]
        return [{"AttributeName": name, "AttributeType": "S"} for name in names]

    def create_table_arguments(self) -> dict[str, Any]:
        """Keyword arguments of DynamoDB ``CreateTable`` for this layout (on-demand billing)."""
        kwargs: dict[str, Any] = {
            "KeySchema": self.key_schema(),
            "AttributeDefinitions": self.attribute_definitions(),
            "BillingMode": "PAY_PER_REQUEST",
        }
        if self.indexes:
            kwargs["GlobalSecondaryIndexes"] = [
                {"IndexName": i.name, "KeySchema": i.key_schema(), "Projection": i.projection()} for i in self.indexes
            ]
        return kwargs


# The runs index (``longstep.runs_index``): one sparse index of the checkpoint table. A run's
# ``index`` record and its facet records (``index#tenant``, ``index#agent``, ``index#tag#<tag>``,
# ``index#parent``) carry ``ix_facet`` (``status#failed``, ``tenant#acme``...) and ``ix_order``
# (its creation instant, zero-padded, then the run id): one Query lists a facet's runs by age.
# Only these records have the attributes, so the index holds nothing else. One index, not one
# per field: CloudFormation adds at most one global secondary index to a table per update.
# ("You can create or delete only one global secondary index per UpdateTable operation"):
# https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateTable.html
RUNS_INDEX = "runs_by_facet"
RUNS_FACET_ATTRIBUTE = "ix_facet"
RUNS_ORDER_ATTRIBUTE = "ix_order"
RUN_INDEX_RECORD = "index"
RUN_FACET_PREFIX = "index#"


def checkpoint_table() -> TableSchema:
    """Runs and their recorded steps: ``pk`` is the run id, ``sk`` the record within the run;
    the sparse ``runs_by_facet`` index lists runs by status, tenant, agent, tag or parent."""
    return TableSchema(
        partition_key="pk",
        sort_key="sk",
        ttl_attribute="expires_at",
        indexes=(IndexSchema(name=RUNS_INDEX, partition_key=RUNS_FACET_ATTRIBUTE, sort_key=RUNS_ORDER_ATTRIBUTE),),
    )


def run_facet(field: str, value: str) -> str:
    """The ``ix_facet`` value of a run's facet (``status``, ``tenant``, ``agent``, ``tag``, ``parent``)."""
    return f"{field}#{value}"


def run_order(created_at: float, run_id: str) -> str:
    """The ``ix_order`` value of a run: its creation instant (epoch seconds, zero-padded) and id."""
    return f"{created_at:017.6f}#{run_id}"


def idempotency_table() -> TableSchema:
    """The Powertools idempotency persistence layout (its defaults: ``id`` and ``expiration``)."""
    return TableSchema(partition_key="id", ttl_attribute="expiration")


def memory_table() -> TableSchema:
    """Long-term memory: ``namespace`` (agent, or agent and user) and the fact's ``key``."""
    return TableSchema(partition_key="namespace", sort_key="key")


# The approvals table: one item per approval request, keyed by its unguessable id. The
# ``by_status`` index lists the requests in one status (``pending``), a run's together: its sort
# key is ``run_id#turn#call`` (run ids hold no ``#``). The task token is not projected into it.
APPROVALS_BY_STATUS_INDEX = "by_status"
APPROVAL_VIEW_ATTRIBUTES = (
    "run_id",
    "turn",
    "call",
    "tool",
    "input",
    "agent",
    "requested_at",
    "expires_at",
    "decision",
    "approver",
    "decided_at",
)


def approvals_table() -> TableSchema:
    """Approval requests: ``approval_id`` (unguessable), TTL ``purge_at``, index ``by_status``."""
    return TableSchema(
        partition_key="approval_id",
        ttl_attribute="purge_at",
        indexes=(IndexSchema(name=APPROVALS_BY_STATUS_INDEX, partition_key="status", sort_key="run_call", projected=APPROVAL_VIEW_ATTRIBUTES),),
    )


def approval_run_call(run_id: str, turn: int, call: int) -> str:
    """The ``by_status`` index sort key of an approval: a run's approvals in turn and call order."""
    return f"{run_id}#{turn:06d}#{call:03d}"


def parse_approval_run_call(value: str) -> tuple[str, int, int]:
    """``(run_id, turn, call)`` of an ``approval_run_call`` value (run ids hold no ``#``)."""
    run_id, turn, call = value.split("#")
    return run_id, int(turn), int(call)


# Sort-key layout of the checkpoint table; zero-padding keeps a run's records in turn order.
# Within a turn: ``step#<turn>#context`` (the live-context snapshot taken before the turn),
# ``#model`` (the reply), ``#summary`` (made while building that turn's context), ``#tool#<call>``.
# Snapshots and summaries sort among the steps so that one Query from the latest snapshot returns
# everything a cold resume needs (see ``longstep.context``).
RUN_RECORD = "run"
FINAL_RECORD = "final"
STEP_PREFIX = "step#"
INTENT_PREFIX = "intent#"
APPROVAL_PREFIX = "approval#"
ESCALATION_PREFIX = "escalation#"
SIGNAL_PREFIX = "signal#"
# The run's inbox of messages from the user (``longstep.steering``), numbered from 0.
MESSAGE_PREFIX = "message#"
# The run's event stream (``longstep.events``): one record per batch, keyed by its first offset.
EVENT_PREFIX = "event#"
EVENT_END = f"{EVENT_PREFIX}~"  # sorts after every event key
# A long-running MCP call's task (``longstep.mcp.tasks``): written before the call, then its task id.
MCP_TASK_PREFIX = "mcptask#"
# Step kinds of the records under STEP_PREFIX; only ``model`` and ``tool`` are recorded steps.
MODEL, TOOL, SNAPSHOT, SUMMARY = "model", "tool", "context", "summary"
# The run record's attribute naming the turn of the run's latest snapshot.
SNAPSHOT_AT = "snapshot_at"
# The run record's attribute naming, for each recent snapshot (by its turn), the first turn whose
# records it references (JSON ``{"<turn>": <first turn>}``): where a cold load's Query starts.
SNAPSHOT_WINDOWS = "snapshot_from"


# The attribute of a forked run's record and first snapshot naming the run and turn it was
# forked from (JSON ``{"run_id": ..., "at_turn": ...}``).
FORKED_FROM = "forked_from"


def model_step_key(turn: int) -> str:
    """Sort key of the model reply recorded for ``turn``."""
    return f"{STEP_PREFIX}{turn:06d}#{MODEL}"


def tool_step_key(turn: int, call: int) -> str:
    """Sort key of the result of tool call ``call`` in ``turn``."""
    return f"{STEP_PREFIX}{turn:06d}#{TOOL}#{call:03d}"


def snapshot_key(turn: int) -> str:
    """Sort key of the live-context snapshot holding every turn before ``turn``; it sorts before
    the records of ``turn`` itself."""
    return f"{STEP_PREFIX}{turn:06d}#{SNAPSHOT}"


def summary_key(turn: int) -> str:
    """Sort key of the summary made while building the context of ``turn``."""
    return f"{STEP_PREFIX}{turn:06d}#{SUMMARY}"


def turn_key(turn: int) -> str:
    """A bound that sorts after every record of turns before ``turn`` and before those of ``turn``."""
    return f"{STEP_PREFIX}{turn:06d}"


def intent_key(turn: int, call: int) -> str:
    """Sort key of the intent marker an at-most-once tool writes before it acts."""
    return f"{INTENT_PREFIX}{turn:06d}#{call:03d}"


def mcp_task_key(turn: int, call: int) -> str:
    """Sort key of the task record of long-running MCP call ``call`` in ``turn``."""
    return f"{MCP_TASK_PREFIX}{turn:06d}#{call:03d}"


def approval_key(turn: int, call: int) -> str:
    """Sort key of the record naming the approval request (in the approvals table) of tool call
    ``call`` in ``turn``."""
    return f"{APPROVAL_PREFIX}{turn:06d}#{call:03d}"


def escalation_key(turn: int, call: int) -> str:
    """Sort key of the escalation of a step (``call`` -1 for the model turn itself)."""
    return f"{ESCALATION_PREFIX}{turn:06d}#{call:03d}"


def message_key(index: int) -> str:
    """Sort key of the ``index``-th message sent to the run."""
    return f"{MESSAGE_PREFIX}{index:06d}"


def event_key(offset: int) -> str:
    """Sort key of the batch of a run's events that starts at ``offset``."""
    return f"{EVENT_PREFIX}{offset:012d}"


def signal_key(event: str) -> str:
    """Sort key of the signal record of ``event`` (its waiter, and the count of signals sent)."""
    return f"{SIGNAL_PREFIX}{event}"


def signal_entry_key(event: str, seq: int) -> str:
    """Sort key of the ``seq``-th signal sent for ``event`` (0 first): the queue in key order.
    Event names hold no ``#`` (``WaitForArgs``), so an entry never reads as another event."""
    return f"{SIGNAL_PREFIX}{event}#{seq:08d}"


@dataclass(frozen=True)
class SortKey:
    """A checkpoint-table sort key taken apart.

    Attributes:
        kind: ``run``, ``final``, ``index`` (the run's entries in the runs index), ``model``, ``tool``,
            ``context`` (snapshot), ``summary``, ``intent``, ``approval``, ``escalation``, ``mcptask``,
            ``signal``, ``event`` (a batch of the run's events) or
            ``message`` (one of the run's inbox, its index as ``call``).
        turn: the turn, for every kind but ``run``, ``final`` and ``signal``.
        call: the tool call (``tool``, ``intent``, ``approval``; ``escalation``: -1 is the model turn).
        event: the event name of a ``signal``.
        seq: the place of a buffered signal in its event's queue (None: the waiter's record).
    """

    kind: str
    turn: int | None = None
    call: int | None = None
    event: str | None = None
    seq: int | None = None

    @property
    def is_step(self) -> bool:
        """A recorded step (a model reply or a tool result), not a snapshot or a summary."""
        return self.kind in (MODEL, TOOL)


class SortKeyError(ValueError):
    """A sort key no format of this module produces."""


def parse(sk: str) -> SortKey:
    """Take a checkpoint-table sort key apart (the inverse of the ``*_key`` functions).

    Raises:
        SortKeyError: the key has none of the formats above.
    """
    if sk in (RUN_RECORD, FINAL_RECORD):
        return SortKey(kind=sk)
    if sk == RUN_INDEX_RECORD or sk.startswith(RUN_FACET_PREFIX):
        return SortKey(kind=RUN_INDEX_RECORD)
    if sk.startswith(SIGNAL_PREFIX):
        event, _, seq = sk[len(SIGNAL_PREFIX) :].partition("#")
        return SortKey(kind="signal", event=event, seq=int(seq) if seq.isdigit() else None)
    if sk.startswith(EVENT_PREFIX) and sk[len(EVENT_PREFIX) :].isdigit():
        return SortKey(kind="event")
    if sk.startswith(MESSAGE_PREFIX) and sk[len(MESSAGE_PREFIX) :].isdigit():
        return SortKey(kind="message", call=int(sk[len(MESSAGE_PREFIX) :]))
    head, _, rest = sk.partition("#")
    parts = rest.split("#")
    try:
        turn = int(parts[0])
        if head == "step" and parts[1:] in ([MODEL], [SNAPSHOT], [SUMMARY]):
            return SortKey(kind=parts[1], turn=turn)
        if head == "step" and len(parts) == 3 and parts[1] == TOOL:
            return SortKey(kind=TOOL, turn=turn, call=int(parts[2]))
        if head in ("intent", "approval", "escalation", "mcptask") and len(parts) == 2:
            return SortKey(kind=head, turn=turn, call=int(parts[1]))
    except (ValueError, IndexError):
        pass
    raise SortKeyError(f"sk: {sk!r} is not a checkpoint-table sort key")


def idempotency_key(run_id: str, turn: int, call: int | None = None) -> str:
    """The idempotency key of a step: ``run_id:seq`` for a model turn, ``run_id:seq:call`` for a tool."""
    return f"{run_id}:{turn}" if call is None else f"{run_id}:{turn}:{call}"
