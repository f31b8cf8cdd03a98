"""``LongstepSaver``: LangGraph's checkpointer on a DynamoDB table, with S3 for large values.

The layout is ``longstep.langgraph.items``'s. What a step costs: ``put`` writes the checkpoint's
new channel values (one BatchWriteItem per 25) and then the checkpoint (one PutItem), so a
checkpoint is never visible before its values; ``put_writes`` one conditional PutItem per write
(a write already recorded is kept, as LangGraph's own savers do; the special channels' writes,
errors and interrupts, replace theirs); ``get_tuple`` one Query (the checkpoint and its writes,
which sort after it) and one BatchGetItem (its channel values): two requests, however long the
thread. The thread-wide operations are in ``longstep.langgraph.threads``, the async methods in
``longstep.langgraph.aio``.
"""

from __future__ import annotations

import random
from typing import Any, Iterator, Mapping, Sequence

import boto3
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from longstep import keys
from longstep.langgraph import items
from longstep.langgraph.aio import AsyncMethods
from longstep.langgraph.history import delta_channel_history
from longstep.langgraph.lists import SNAPSHOT_EVERY, ListDeltas
from longstep.langgraph.rows import Rows, config_of, group
from longstep.langgraph.table import Table
from longstep.langgraph.threads import ThreadOperations

# Items a Query page holds while looking for a thread's newest checkpoint (its writes come first).
LATEST_PAGE = 16


class LongstepSaver(AsyncMethods, ThreadOperations, BaseCheckpointSaver[str]):
    """A LangGraph checkpointer that stores checkpoints in DynamoDB (and large values in S3).

    Args:
        table_name: a table keyed like Longstep's checkpoint table (string ``pk`` and ``sk``):
            Longstep's own, or one made with ``create_table``.
        dynamodb: a boto3 DynamoDB client (default: a new one).
        bucket: the S3 bucket for values over ``offload_bytes`` once compressed (None: such a
            value is refused with ``RecordTooLargeError``).
        s3: a boto3 S3 client (default: a new one when ``bucket`` is given).
        offload_bytes: a value larger than this after compression goes to S3.
        ttl_days: items expire through DynamoDB TTL (``expires_at``) this many days after they
            are written (None: they never do).
        snapshot_every: a list channel's value is written whole again after this many values
            that only add to the one before (``longstep.langgraph.lists``).
        serde: LangGraph's serializer (default: the base class's ``JsonPlusSerializer``).

    Example:
        >>> saver = LongstepSaver("checkpoints", bucket="my-artifacts")  # doctest: +SKIP
        >>> graph = builder.compile(checkpointer=saver)  # doctest: +SKIP
    """

    def __init__(
        self,
        table_name: str,
        *,
        dynamodb: Any = None,
        bucket: str | None = None,
        s3: Any = None,
        offload_bytes: int = items.DEFAULT_OFFLOAD_BYTES,
        ttl_days: int | None = None,
        snapshot_every: int = SNAPSHOT_EVERY,
        serde: SerializerProtocol | None = None,
    ) -> None:
        super().__init__(serde=serde)
        self.table = Table(dynamodb or boto3.client("dynamodb"), table_name)
        offload = items.Offload(s3 or (boto3.client("s3") if bucket else None), bucket, offload_bytes)
        ttl = ttl_days * 86_400 if ttl_days is not None else None
        self.rows = Rows(self.table, offload, self.serde, ttl, ListDeltas(self.serde, snapshot_every))

    @staticmethod
    def create_table(dynamodb: Any, table_name: str) -> None:
        """Create a table of Longstep's checkpoint layout (on-demand), and wait until it exists."""
        dynamodb.create_table(TableName=table_name, **keys.checkpoint_table().create_table_arguments())
        dynamodb.get_waiter("table_exists").wait(TableName=table_name)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (its ``checkpoint_id``), or the thread's newest in the
        namespace; None when there is none. One Query and one BatchGetItem."""
        thread_id, ns = _thread_and_ns(config)
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id:
            sk = items.checkpoint_sk(ns, checkpoint_id)
            found = list(self.table.query(items.pk(thread_id), sk))
            head = next((i for i in found if i["sk"]["S"] == sk), None)
            if head is None:
                return None
            return self.rows.to_tuple(thread_id, head, [i for i in found if i["sk"]["S"].startswith(sk + "#w#")])
        stream = self.table.query(items.pk(thread_id), items.checkpoints_prefix(ns), descending=True, page_size=LATEST_PAGE)
        for head, writes in group(stream):
            return self.rows.to_tuple(thread_id, head, writes)
        return None

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """A thread's checkpoints, newest first, in its namespace (every namespace when the config
        names none), before ``before``'s, whose metadata has every ``filter`` item, at most ``limit``.

        One thread's are one Query, read page by page as they are consumed. Without a config every
        thread's are listed, found by a Scan of the table.
        """
        if config is None:
            threads = sorted({i["pk"]["S"][len(items.PK_PREFIX) :] for i in self._checkpoint_keys()})
            remaining = limit
            for thread_id in threads:
                for found in self.list({"configurable": {"thread_id": thread_id}}, filter=filter, before=before, limit=remaining):
                    yield found
                    remaining = None if remaining is None else remaining - 1
                    if remaining == 0:
                        return
            return
        thread_id = config["configurable"]["thread_id"]
        ns = config["configurable"].get("checkpoint_ns")
        only = get_checkpoint_id(config)
        before_id = get_checkpoint_id(before) if before else None
        below = items.checkpoint_sk(ns, before_id) if before_id and ns is not None else None
        stream = self.table.query(items.pk(thread_id), items.checkpoints_prefix(ns), descending=True, below=below)
        count = 0
        for head, writes in group(stream):
            checkpoint_id = head["i"]["S"]
            if (only and checkpoint_id != only) or (before_id and checkpoint_id >= before_id):
                continue
            if filter:
                metadata = self.rows.load("m", head)
                if not all(metadata.get(k) == v for k, v in filter.items()):
                    continue
            if limit is not None and count >= limit:
                return
            count += 1
            yield self.rows.to_tuple(thread_id, head, writes)

    def put(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, new_versions: ChannelVersions) -> RunnableConfig:
        """Store a checkpoint: its new channel values first (BatchWriteItem), then the checkpoint
        itself (PutItem). Returns the config naming it."""
        thread_id = config["configurable"]["thread_id"]
        ns = config["configurable"].get("checkpoint_ns", "")
        values = checkpoint["channel_values"]
        parent = config["configurable"].get("checkpoint_id")
        pending = self.rows.lists.begin(thread_id, ns, parent, checkpoint["id"])
        blobs = [self.rows.blob_item(pending, ch, version, values) for ch, version in new_versions.items()]
        if blobs:
            self.table.write_many(blobs)
        self.table.put(self.rows.checkpoint_item(thread_id, ns, checkpoint, get_checkpoint_metadata(config, metadata), parent))
        self.rows.lists.commit(pending)
        return config_of(thread_id, ns, checkpoint["id"])

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = "") -> None:
        """Store a task's writes against a checkpoint: one conditional PutItem each, so a write
        already recorded (the same task and index) is kept; an error's, an interrupt's, a
        scheduled or a resume write (negative indices) replaces its earlier one."""
        thread_id, ns = _thread_and_ns(config)
        checkpoint_id = config["configurable"]["checkpoint_id"]
        for idx, (channel, value) in enumerate(writes):
            index = WRITES_IDX_MAP.get(channel, idx)
            item = self.rows.write_item(thread_id, ns, checkpoint_id, task_id, task_path, index, channel, value)
            if index >= 0:
                self.table.put_new(item)
            else:
                self.table.put(item)

    def get_delta_channel_history(self, *, config: RunnableConfig, channels: Sequence[str]) -> Mapping[str, DeltaChannelHistory]:
        """Each channel's writes along the parent chain back to its nearest stored value (its
        seed): one Query read newest first from the checkpoint down, and one BatchGetItem for the
        seeds, instead of a ``get_tuple`` per ancestor (``longstep.langgraph.history``)."""
        return delta_channel_history(self.table, self.rows, config, channels)

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Versions that sort as they grow, with a random fraction
        (``00000000000000000000000000000003.0.5488135039273248``), as LangGraph's SQL savers make
        them: a channel's values sort in the order they were written, and two branches of a fork
        never write the same version."""
        number = 0 if current is None else int(str(current).split(".")[0])
        return f"{number + 1:032}.{random.random():016}"

    def _checkpoint_keys(self) -> Iterator[dict[str, Any]]:
        values = {":lg": {"S": items.PK_PREFIX}, ":c": {"S": "c#"}}
        return self.table.scan("begins_with(pk, :lg) AND begins_with(sk, :c)", values, projection="pk, sk")


def _thread_and_ns(config: RunnableConfig) -> tuple[str, str]:
    return config["configurable"]["thread_id"], config["configurable"].get("checkpoint_ns", "")
