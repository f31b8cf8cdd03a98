"""The saver's operations on whole threads: ``delete_thread``, ``copy_thread``, ``prune`` and
``delete_for_runs``.

A thread is one partition, so each reads it with one Query (page by page) and writes with
BatchWriteItem, 25 items a request. What a reader needs is written first: a copy's channel values
and writes before its checkpoints, a deletion's checkpoints before the values they hold. Values
offloaded to S3 live in the thread's folder; they are deleted (or copied) with it, and a pruned
value's object goes when no item left refers to it.
"""

from __future__ import annotations

from typing import Any, Sequence

from longstep.langgraph import items, lists
from longstep.langgraph.rows import Rows
from longstep.langgraph.table import Table

# DynamoDB's IN takes at most 100 operands
# (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.OperatorsAndFunctions.html).
IN_OPERANDS = 100


class ThreadOperations:
    """The thread-wide methods of ``LongstepSaver`` (its ``table`` and ``rows``)."""

    table: Table
    rows: Rows

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, write and value of a thread, and its S3 objects."""
        keys = [(i["pk"]["S"], i["sk"]["S"]) for i in self.table.query(items.pk(thread_id), "", keys_only=True)]
        self.table.write_many(deletes=sorted(keys, key=lambda k: not items.is_checkpoint(k[1])))
        self.rows.lists.forget(thread_id)
        offload = self.rows.offload
        stored = offload.keys_of(thread_id)
        if stored:
            offload.delete(stored)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint (the whole parent chain), write and value of a thread to another
        (S3 objects too); the source is left as it was."""
        offload = self.rows.offload
        copied: dict[str, str] = {}
        values, checkpoints = [], []
        for item in self.table.query(items.pk(source_thread_id), ""):
            new = dict(item, pk={"S": items.pk(target_thread_id)})
            for name in items.PAYLOADS:
                if f"{name}s" in item:
                    key = item[f"{name}s"]["S"]
                    copied.setdefault(key, offload.copy(key, target_thread_id))
                    new[f"{name}s"] = {"S": copied[key]}
            (checkpoints if items.is_checkpoint(item["sk"]["S"]) else values).append(new)
        self.table.write_many(values)
        self.table.write_many(checkpoints)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Prune threads: ``"keep_latest"`` keeps each namespace's newest checkpoint, its writes
        and the values it holds (and, for a delta channel, the ancestors back to the one that
        stores its value, which it is rebuilt from); ``"delete"`` deletes the threads."""
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"prune: unknown strategy {strategy!r} (keep_latest or delete)")
        for thread_id in thread_ids:
            if strategy == "delete":
                self.delete_thread(thread_id)
            else:
                self._retain(thread_id, _newest_chains)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) whose metadata names one of ``run_ids``, in
        every thread, and the values no checkpoint left holds. The checkpoints are found by a Scan
        of the table: an operation for housekeeping, not for a request path."""
        threads: set[str] = set()
        doomed: set[tuple[str, str]] = set()
        for start in range(0, len(run_ids), IN_OPERANDS):
            chunk = list(run_ids[start : start + IN_OPERANDS])
            names = {f":r{n}": {"S": run_id} for n, run_id in enumerate(chunk)}
            expression = f"begins_with(pk, :lg) AND #run IN ({', '.join(names)})"
            found = self.table.scan(expression, {":lg": {"S": items.PK_PREFIX}, **names}, projection="pk, sk", names={"#run": "r"})
            for item in found:
                threads.add(item["pk"]["S"][len(items.PK_PREFIX) :])
                doomed.add((item["pk"]["S"], item["sk"]["S"]))
        for thread_id in sorted(threads):
            self._retain(thread_id, lambda heads: {sk for sk in heads if (items.pk(thread_id), sk) not in doomed})

    def _retain(self, thread_id: str, keep: Any) -> None:
        """Keep the checkpoints ``keep`` picks from a thread's (sort key -> item), their writes and
        the values they hold; delete the rest (checkpoints first) and S3 objects no longer used."""
        self.rows.lists.forget(thread_id)
        everything = list(self.table.query(items.pk(thread_id), ""))
        heads = {i["sk"]["S"]: i for i in everything if items.is_checkpoint(i["sk"]["S"])}
        kept = keep(heads)
        needed = set(kept)
        for sk in kept:
            head = heads[sk]
            versions = self.rows.load("c", head)["channel_versions"]
            needed.update(items.blob_sk(head["n"]["S"], ch, v) for ch, v in versions.items())
        by_sk = {i["sk"]["S"]: i for i in everything}
        for sk in [sk for sk in needed if sk in by_sk]:  # a value that extends another needs it
            while "db" in by_sk.get(sk, {}):
                sk = lists.base_sk(sk, by_sk[sk]["db"]["S"], items.escape)
                needed.add(sk)
        gone = [i for i in everything if _owner(i["sk"]["S"]) not in needed]
        gone.sort(key=lambda i: not items.is_checkpoint(i["sk"]["S"]))
        self.table.write_many(deletes=[(i["pk"]["S"], i["sk"]["S"]) for i in gone])
        still = {key for i in everything if _owner(i["sk"]["S"]) in needed for key in items.s3_keys(i)}
        unused = sorted({key for i in gone for key in items.s3_keys(i)} - still)
        if unused:
            self.rows.offload.delete(unused)


def _owner(sk: str) -> str:
    """The key that decides whether an item stays: a write's checkpoint, else the item's own."""
    return items.owner_of_write(sk) if sk.startswith("c#") else sk


def _newest_chains(heads: dict[str, dict[str, Any]]) -> set[str]:
    """Each namespace's newest checkpoint, and its ancestors back to where every channel it holds
    no value for (a delta channel between snapshots) has one stored."""
    by_ns: dict[str, dict[str, dict[str, Any]]] = {}
    for sk, head in heads.items():
        by_ns.setdefault(head["n"]["S"], {})[head["i"]["S"]] = head
    kept: set[str] = set()
    for ns, by_id in by_ns.items():
        newest = by_id[max(by_id)]
        kept.add(newest["sk"]["S"])
        missing = _channels(newest) - Rows.filled(newest)
        parent = newest.get("p", {}).get("S")
        while missing and parent in by_id:
            ancestor = by_id[parent]
            kept.add(ancestor["sk"]["S"])
            missing -= Rows.filled(ancestor)
            parent = ancestor.get("p", {}).get("S")
    return kept


def _channels(head: dict[str, Any]) -> set[str]:
    """The channels a checkpoint item lists as holding or not holding a value (``f`` and ``d``)."""
    return Rows.filled(head) | {v["S"] for v in head.get("d", {}).get("L", [])}
