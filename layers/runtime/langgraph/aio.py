"""The saver's async methods: each runs its sync twin in the event loop's default executor, so
boto3's blocking requests never block the loop (LangGraph calls these from ``ainvoke``/``astream``)."""

from __future__ import annotations

import asyncio
import functools
from typing import Any, AsyncIterator, Callable, Mapping, Sequence, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointTuple, DeltaChannelHistory

T = TypeVar("T")


async def _off_loop(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await asyncio.get_running_loop().run_in_executor(None, functools.partial(fn, *args, **kwargs))


class AsyncMethods:
    """``aget_tuple``, ``alist``, ``aput``, ``aput_writes``, ``adelete_thread``,
    ``adelete_for_runs``, ``acopy_thread``, ``aprune`` and ``aget_delta_channel_history``."""

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """``get_tuple``, off the event loop."""
        return await _off_loop(self.get_tuple, config)  # type: ignore[attr-defined]

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """``list``, off the event loop, one checkpoint at a time (its pages read as they are needed)."""
        found = iter(self.list(config, filter=filter, before=before, limit=limit))  # type: ignore[attr-defined]
        done = object()
        while (tup := await _off_loop(next, found, done)) is not done:
            yield tup  # type: ignore[misc]

    async def aput(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, new_versions: ChannelVersions
    ) -> RunnableConfig:
        """``put``, off the event loop."""
        return await _off_loop(self.put, config, checkpoint, metadata, new_versions)  # type: ignore[attr-defined]

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = "") -> None:
        """``put_writes``, off the event loop."""
        await _off_loop(self.put_writes, config, writes, task_id, task_path)  # type: ignore[attr-defined]

    async def adelete_thread(self, thread_id: str) -> None:
        """``delete_thread``, off the event loop."""
        await _off_loop(self.delete_thread, thread_id)  # type: ignore[attr-defined]

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """``delete_for_runs``, off the event loop."""
        await _off_loop(self.delete_for_runs, run_ids)  # type: ignore[attr-defined]

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """``copy_thread``, off the event loop."""
        await _off_loop(self.copy_thread, source_thread_id, target_thread_id)  # type: ignore[attr-defined]

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``prune``, off the event loop."""
        await _off_loop(self.prune, thread_ids, strategy=strategy)  # type: ignore[attr-defined]

    async def aget_delta_channel_history(self, *, config: RunnableConfig, channels: Sequence[str]) -> Mapping[str, DeltaChannelHistory]:
        """``get_delta_channel_history``, off the event loop."""
        return await _off_loop(self.get_delta_channel_history, config=config, channels=channels)  # type: ignore[attr-defined]
