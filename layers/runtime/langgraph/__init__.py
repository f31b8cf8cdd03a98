"""A LangGraph checkpointer on Longstep's storage: ``from longstep.langgraph import LongstepSaver``.

Needs the optional dependency ``langgraph-checkpoint`` (``pip install "longstep[langgraph]"``);
``import longstep`` never loads this package. See docs/langgraph.md.
"""

from __future__ import annotations

try:
    import langgraph.checkpoint.base  # noqa: F401
except ImportError as exc:  # pragma: no cover - the message is the point
    raise ImportError('longstep.langgraph needs langgraph-checkpoint: pip install "longstep[langgraph]"') from exc

from longstep.langgraph.saver import LongstepSaver

__all__ = ["LongstepSaver"]
