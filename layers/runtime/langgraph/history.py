"""``get_delta_channel_history`` on the saver's table: a delta channel's writes along the parent
chain, back to the nearest ancestor that stores the channel's value (its seed).

The base class walks the chain one ``get_tuple`` at a time: two requests per ancestor, and with a
snapshot every 50 updates, a hundred or more requests to rebuild one channel (the storage bench's
"253 requests" for ``DynamoDBSaver``). Here a namespace's checkpoints and their writes are one key
range, read newest first from the target down in Query pages of up to 1 MB, so the walk costs
one request per page, and one BatchGetItem for the seeds. As LangGraph's contract has it: the
target's own writes are not included (they are pending for the next step); an ancestor's writes
are, the seed ancestor's too (its stored value is the state entering it); only on-path ancestors
count (a fork's siblings are skipped); a channel with no stored value back to the root has no seed.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import DeltaChannelHistory, PendingWrite, get_checkpoint_id

from longstep.langgraph import items
from longstep.langgraph.rows import Rows, group
from longstep.langgraph.table import Table


def delta_channel_history(table: Table, rows: Rows, config: RunnableConfig, channels: Sequence[str]) -> Mapping[str, DeltaChannelHistory]:
    """Per channel: ``writes``, oldest first, and ``seed`` when an ancestor stores a value.

    Args:
        table: the saver's table.
        rows: the saver's item codec.
        config: names the target checkpoint (its thread's newest without a ``checkpoint_id``).
        channels: the channels to walk for; none gives an empty mapping.
    """
    if not channels:
        return {}
    thread_id = config["configurable"]["thread_id"]
    ns = config["configurable"].get("checkpoint_ns", "")
    collected: dict[str, list[PendingWrite]] = {ch: [] for ch in channels}
    seeds: dict[str, str] = {}  # channel -> the sort key of its seed's blob
    remaining = set(channels)
    stream = table.query(items.pk(thread_id), items.checkpoints_prefix(ns), descending=True, below=_upper_bound(ns, get_checkpoint_id(config)))
    cursor: str | None = None
    target_id = get_checkpoint_id(config)
    for head, writes in group(stream):
        checkpoint_id = head["i"]["S"]
        if cursor is None:  # the target: its writes are pending, the walk starts at its parent
            if target_id and checkpoint_id != target_id:
                continue
            cursor = head.get("p", {}).get("S")
            if cursor is None:
                break
            continue
        if checkpoint_id != cursor:
            continue  # not on the path (a fork's other branch)
        for write in reversed(rows.writes(writes, remaining)):
            collected[write[1]].append(write)
        stored_here = remaining & rows.filled(head)
        if stored_here:
            versions = rows.load("c", head)["channel_versions"]
            for ch in stored_here:
                seeds[ch] = items.blob_sk(ns, ch, versions[ch])
            remaining -= stored_here
        cursor = head.get("p", {}).get("S")
        if cursor is None or not remaining:
            break
    found = table.get_many([(items.pk(thread_id), sk) for sk in seeds.values()]) if seeds else {}
    result: dict[str, DeltaChannelHistory] = {}
    for ch in channels:
        entry: DeltaChannelHistory = {"writes": list(reversed(collected[ch]))}
        blob = found.get((items.pk(thread_id), seeds[ch])) if ch in seeds else None
        if blob is not None and blob["vt"]["S"] != items.EMPTY:
            entry["seed"] = rows.blob_value(blob)
        result[ch] = entry
    return result


def _upper_bound(ns: str, checkpoint_id: str | None) -> str | None:
    """The first sort key after the target and its writes (None: read from the newest)."""
    if not checkpoint_id:
        return None
    return items.checkpoint_sk(ns, checkpoint_id) + "#w#\U0010ffff"
