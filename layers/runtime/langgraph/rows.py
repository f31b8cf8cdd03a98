"""LangGraph's records as the saver's items, and back: checkpoints, pending writes, channel values.

A checkpoint item holds the checkpoint without its channel values (``c``), its metadata (``m``),
its namespace (``n``), id (``i``), parent id (``p``), the channels whose value it holds (``f``)
and those it holds none for (``d``: a delta channel between snapshots) and the metadata's ``run_id`` (``r``, for
``delete_for_runs``). A value is read from the blob item of its channel's version.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from langgraph.checkpoint.base import CheckpointTuple, PendingWrite, writes_sort_key
from langgraph.checkpoint.serde.base import SerializerProtocol

from longstep import clock
from longstep.langgraph import items, lists
from longstep.langgraph.lists import ListDeltas, Pending
from longstep.langgraph.table import Table


class Rows:
    """Encodes and decodes the saver's items.

    Args:
        table: the saver's table.
        offload: where large payloads go.
        serde: LangGraph's serializer (the saver's ``serde``).
        ttl_seconds: items expire (DynamoDB TTL, ``expires_at``) this long after they are written;
            None: never.
    """

    def __init__(self, table: Table, offload: items.Offload, serde: SerializerProtocol, ttl_seconds: int | None, lists: ListDeltas) -> None:
        self.table = table
        self.offload = offload
        self.serde = serde
        self.ttl_seconds = ttl_seconds
        self.lists = lists

    def _base(self, thread_id: str, sk: str) -> dict[str, Any]:
        item: dict[str, Any] = {"pk": {"S": items.pk(thread_id)}, "sk": {"S": sk}}
        if self.ttl_seconds is not None:
            item["expires_at"] = {"N": str(int(clock.now()) + self.ttl_seconds)}
        return item

    def checkpoint_item(
        self, thread_id: str, ns: str, checkpoint: Mapping[str, Any], metadata: Mapping[str, Any], parent: str | None
    ) -> dict[str, Any]:
        """A checkpoint's item (its channel values are written as blob items)."""
        values = checkpoint["channel_values"]
        bare = {k: v for k, v in checkpoint.items() if k != "channel_values"}
        item = self._base(thread_id, items.checkpoint_sk(ns, checkpoint["id"]))
        item.update(n={"S": ns}, i={"S": checkpoint["id"]})
        item["f"] = {"L": [{"S": ch} for ch in checkpoint["channel_versions"] if ch in values]}
        unheld = [{"S": ch} for ch in checkpoint["channel_versions"] if ch not in values]
        if unheld:
            item["d"] = {"L": unheld}
        if parent:
            item["p"] = {"S": parent}
        if isinstance(metadata.get("run_id"), str):
            item["r"] = {"S": metadata["run_id"]}
        item.update(items.pack("c", self.serde.dumps_typed(bare), thread_id, self.offload))
        item.update(items.pack("m", self.serde.dumps_typed(dict(metadata)), thread_id, self.offload))
        return items.checked(item)

    def blob_item(self, pending: Pending, channel: str, version: Any, values: Mapping[str, Any]) -> dict[str, Any]:
        """A channel's value at a version (``empty`` when the checkpoint holds none for it; what
        it adds to the channel's previous value, for a list that extends it: ``longstep.langgraph.lists``)."""
        thread_id = pending.thread_id
        item = self._base(thread_id, items.blob_sk(pending.ns, channel, version))
        extension = self.lists.encode(pending, channel, version, values[channel]) if channel in values else None
        if extension is not None:
            typed, attrs = extension
            item.update(attrs)
        else:
            typed = self.serde.dumps_typed(values[channel]) if channel in values else (items.EMPTY, b"")
        item.update(items.pack("v", typed, thread_id, self.offload))
        return items.checked(item)

    def blob_value(self, item: Mapping[str, Any]) -> Any:
        """The value a blob item holds: for one that extends another, read with the items back to
        its chain's whole list (one Query of the channel's key range; a missing one by its key)."""
        if "db" not in item:
            return self.load("v", item)
        pk, sk = item["pk"]["S"], item["sk"]["S"]
        first = lists.base_sk(sk, item["ds"]["S"], items.escape)
        found = {i["sk"]["S"]: i for i in self.table.query(pk, sk.rsplit("#", 1)[0] + "#", between=(first, sk))}
        added, current = [], item
        while "db" in current:
            added.append(self.load("v", current))
            base = lists.base_sk(current["sk"]["S"], current["db"]["S"], items.escape)
            following = found.get(base) or self.table.get_many([(pk, base)]).get((pk, base))
            if following is None:
                raise LookupError(f"LangGraph value {sk} extends {base}, which is not in the table")
            current = following
        return lists.assembled(self.load("v", current), added[::-1], "dw" in item)

    def write_item(
        self, thread_id: str, ns: str, checkpoint_id: str, task_id: str, task_path: str, idx: int, channel: str, value: Any
    ) -> dict[str, Any]:
        """A pending write's item."""
        item = self._base(thread_id, items.write_sk(ns, checkpoint_id, task_id, idx))
        item.update(ch={"S": channel}, tk={"S": task_id}, tp={"S": task_path}, ix={"N": str(idx)})
        item.update(items.pack("v", self.serde.dumps_typed(value), thread_id, self.offload))
        return items.checked(item)

    def load(self, name: str, item: Mapping[str, Any]) -> Any:
        """A payload of an item, deserialized."""
        return self.serde.loads_typed(items.unpack(name, item, self.offload))

    @staticmethod
    def filled(item: Mapping[str, Any]) -> set[str]:
        """The channels a checkpoint item holds a value for."""
        return {v["S"] for v in item.get("f", {}).get("L", [])}

    def writes(self, write_items: Iterable[Mapping[str, Any]], channels: set[str] | None = None) -> list[PendingWrite]:
        """Pending writes in the order live execution applies them (``writes_sort_key``); only
        those of ``channels`` when given."""
        chosen = [w for w in write_items if channels is None or w["ch"]["S"] in channels]
        chosen.sort(key=lambda w: writes_sort_key(w["tp"]["S"], w["tk"]["S"], int(w["ix"]["N"])))
        return [(w["tk"]["S"], w["ch"]["S"], self.load("v", w)) for w in chosen]

    def values(self, thread_id: str, ns: str, versions: Mapping[str, Any], wanted: set[str]) -> dict[str, Any]:
        """Channel values at ``versions``, for the channels in ``wanted``: one BatchGetItem (or
        one per 100 channels)."""
        keys = {ch: (items.pk(thread_id), items.blob_sk(ns, ch, ver)) for ch, ver in versions.items() if ch in wanted}
        found = self.table.get_many(list(keys.values())) if keys else {}
        out: dict[str, Any] = {}
        for ch, key in keys.items():
            blob = found.get(key)
            if blob is not None and blob["vt"]["S"] != items.EMPTY:
                out[ch] = self.blob_value(blob)
        return out

    def to_tuple(self, thread_id: str, item: Mapping[str, Any], write_items: Iterable[Mapping[str, Any]]) -> CheckpointTuple:
        """A checkpoint item and its writes' items as LangGraph's ``CheckpointTuple``."""
        ns, checkpoint_id = item["n"]["S"], item["i"]["S"]
        checkpoint = self.load("c", item)
        checkpoint["channel_values"] = self.values(thread_id, ns, checkpoint["channel_versions"], self.filled(item))
        parent = item.get("p", {}).get("S")
        return CheckpointTuple(
            config=config_of(thread_id, ns, checkpoint_id),
            checkpoint=checkpoint,
            metadata=self.load("m", item),
            parent_config=config_of(thread_id, ns, parent) if parent else None,
            pending_writes=self.writes(write_items),
        )


def config_of(thread_id: str, ns: str, checkpoint_id: str) -> dict[str, Any]:
    """The config naming a checkpoint."""
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}}


def group(stream: Iterable[dict[str, Any]]) -> Iterable[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Checkpoint items with their writes' items, from a Query read newest first (a checkpoint's
    writes sort after it, so they come before it)."""
    pending: dict[str, list[dict[str, Any]]] = {}
    for item in stream:
        sk = item["sk"]["S"]
        if items.is_checkpoint(sk):
            yield item, pending.pop(sk, [])
        else:
            pending.setdefault(items.owner_of_write(sk), []).append(item)
