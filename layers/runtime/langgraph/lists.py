"""A list channel's value written as what it adds to the value the saver wrote before it.

LangGraph stores a channel's whole value at each new version: with ``add_messages`` every step
writes the whole conversation again, and a thread's storage grows with the square of its length.
When a list's first elements are the channel's previous value (as this saver last wrote it), its
blob item holds only the elements added (``v``), the version it extends (``db``), that version's
length (``dn``) and the version of the whole list its chain starts from (``ds``). A
``DeltaChannel``'s snapshot of a list (``_DeltaSnapshot``, every ``snapshot_frequency`` updates)
is stored the same way against the snapshot before it (``dw``: read back as a snapshot); after
``snapshot_every`` such items the whole list is written again, so reading a value reads at most
that many items, one key range of one Query (versions sort as they grow: ``get_next_version``).

What a list extends is known from this process's own writes (no read): each element's serialized
bytes are hashed, and the hashes of the channel's last value are kept per thread, namespace and
channel. They are used only while the thread goes on from the checkpoint this process wrote last
(another writer, a fork, this saver's deletion or prune in between: the whole list is written;
another process deleting the thread meanwhile is not seen, and the value read back then raises). A version is written
once (``get_next_version`` draws a random fraction, as LangGraph's SQL savers do), so the items a
value extends never change.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

try:  # DeltaChannel's snapshot of its whole value (beta in langgraph-checkpoint 4.3)
    from langgraph.checkpoint.serde.types import _DeltaSnapshot
except ImportError:  # pragma: no cover - an older langgraph-checkpoint
    _DeltaSnapshot = None  # type: ignore[assignment,misc]

SNAPSHOT_EVERY = 50


@dataclass
class _Last:
    version: str
    snapshot: str
    depth: int
    digests: list[bytes]


@dataclass
class Pending:
    """What a put will have written, recorded once its writes succeeded (``ListDeltas.commit``)."""

    thread_id: str
    ns: str
    checkpoint_id: str
    parent: str | None
    values: dict[str, _Last | None] = field(default_factory=dict)


class ListDeltas:
    """The hashes of each list channel's last value this process wrote.

    Args:
        serde: LangGraph's serializer.
        snapshot_every: the whole list is written again after this many extensions.
    """

    def __init__(self, serde: SerializerProtocol, snapshot_every: int = SNAPSHOT_EVERY) -> None:
        self.serde = serde
        self.snapshot_every = snapshot_every
        self._heads: dict[tuple[str, str], str] = {}
        self._last: dict[tuple[str, str, str], _Last] = {}
        # The async methods run in executor threads: puts of different threads at once.
        self._lock = threading.Lock()

    def begin(self, thread_id: str, ns: str, parent: str | None, checkpoint_id: str) -> Pending:
        """A put of ``checkpoint_id`` (child of ``parent``) starts."""
        return Pending(thread_id, ns, checkpoint_id, parent)

    def encode(self, pending: Pending, channel: str, version: Any, value: Any) -> tuple[tuple[str, bytes], dict[str, Any]] | None:
        """The serialized elements ``value`` adds, and the attributes naming what it extends;
        None when the whole value is to be written."""
        wrapped = _DeltaSnapshot is not None and isinstance(value, _DeltaSnapshot)
        if wrapped:
            value = value.value
        if type(value) is not list:
            pending.values[channel] = None
            return None
        digests = [hashlib.sha256(b"%s\0%s" % (kind.encode(), data)).digest()[:16] for kind, data in map(self.serde.dumps_typed, value)]
        with self._lock:
            going_on = self._heads.get((pending.thread_id, pending.ns)) == pending.parent
            last = self._last.get((pending.thread_id, pending.ns, channel)) if going_on else None
        n = len(last.digests) if last else 0
        if last is None or last.depth >= self.snapshot_every or n == 0 or digests[:n] != last.digests:
            pending.values[channel] = _Last(str(version), str(version), 0, digests)
            return None
        pending.values[channel] = _Last(str(version), last.snapshot, last.depth + 1, digests)
        attrs = {"db": {"S": last.version}, "dn": {"N": str(n)}, "ds": {"S": last.snapshot}}
        if wrapped:
            attrs["dw"] = {"BOOL": True}
        return self.serde.dumps_typed(value[n:]), attrs

    def commit(self, pending: Pending) -> None:
        """The put's writes succeeded: its lists are what the thread's next put may extend."""
        key = (pending.thread_id, pending.ns)
        with self._lock:
            if self._heads.get(key) != pending.parent:
                for k in [k for k in self._last if k[:2] == key]:
                    del self._last[k]
            self._heads[key] = pending.checkpoint_id
            for channel, last in pending.values.items():
                if last is None:
                    self._last.pop((*key, channel), None)
                else:
                    self._last[(*key, channel)] = last

    def forget(self, thread_id: str) -> None:
        """A thread's items were deleted or pruned: extend none of its values again."""
        with self._lock:
            for key in [k for k in self._heads if k[0] == thread_id]:
                del self._heads[key]
            for key in [k for k in self._last if k[0] == thread_id]:
                del self._last[key]


def assembled(whole: Any, added: list[list[Any]], wrapped: bool) -> Any:
    """A value from the whole list its chain starts from (or that list's ``_DeltaSnapshot``) and
    what each item after it adds, oldest first; as a ``_DeltaSnapshot`` when ``wrapped``."""
    value = list(whole.value if _DeltaSnapshot is not None and isinstance(whole, _DeltaSnapshot) else whole)
    for part in added:
        value.extend(part)
    return _DeltaSnapshot(value) if wrapped and _DeltaSnapshot is not None else value


def base_sk(sk: str, base_version: str, escape: Any) -> str:
    """The sort key of the blob a delta blob (``sk``) extends."""
    return f"{sk.rsplit('#', 1)[0]}#{escape(base_version)}"
