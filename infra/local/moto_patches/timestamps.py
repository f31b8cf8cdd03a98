"""moto's Step Functions timestamps on the virtual clock: execution start and stop dates, history
events, the context object's entered times, state machine and alias dates."""

from __future__ import annotations

import datetime as _dt
import importlib
from typing import Any

from longstep_kit.local.moto_patches.registry import harness, patch

# moto modules that stamp with ``datetime.datetime.now``: each sees a ``datetime`` module whose
# ``now`` is the virtual clock's. Start dates (``StartExecution``), stop dates (an execution's end,
# ``StopExecution``), every history event, ``$$.State.EnteredTime``, a Map run's dates, a
# Parallel branch's stop, and the creation and update dates of machines, aliases and activities.
_NOW_MODULES = (
    "moto.stepfunctions.parser.models",
    "moto.stepfunctions.parser.backend.execution",
    "moto.stepfunctions.parser.backend.state_machine",
    "moto.stepfunctions.parser.backend.alias",
    "moto.stepfunctions.parser.backend.activity",
    "moto.stepfunctions.parser.asl.eval.event.event_manager",
    "moto.stepfunctions.parser.asl.component.state.state",
    "moto.stepfunctions.parser.asl.component.state.exec.state_parallel.branches_decl",
    "moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.itemprocessor.map_run_record",
)
# moto modules that stamp with ``moto.core.utils.utcnow`` (naive UTC): ``StopExecution``'s stop date.
_UTCNOW_MODULES = ("moto.stepfunctions.models",)


@harness
def engine_timestamps(clock: Any) -> None:
    """Every time moto's Step Functions reports is read from ``clock`` (a VirtualClock), not the host.

    The handlers stamp their records with the virtual clock (``longstep.clock``); moto stamped
    executions and their histories with the host's clock, so against the local stack a step
    looked recorded months before its execution started, and ``longstep runs`` aged a run by
    the host's time. In AWS one clock stamps both. Keeps identical: each value's type and time
    zone (aware UTC where moto passes a zone, naive local time where it passes none, naive UTC
    for ``utcnow``), every other ``datetime`` attribute those modules use, and the formats moto
    answers in.
    """

    class VirtualDatetime(_dt.datetime):
        """``datetime.datetime`` with ``now`` (and ``utcnow``) read from the virtual clock."""

        @classmethod
        def now(cls, tz: Any = None) -> _dt.datetime:  # type: ignore[override]
            return _dt.datetime.fromtimestamp(clock.time(), tz)

        @classmethod
        def utcnow(cls) -> _dt.datetime:  # type: ignore[override]
            return _dt.datetime.fromtimestamp(clock.time(), _dt.timezone.utc).replace(tzinfo=None)

    class DatetimeModule:
        """The ``datetime`` module as those moto modules see it."""

        datetime = VirtualDatetime

        def __getattr__(self, name: str) -> Any:
            return getattr(_dt, name)

    shim = DatetimeModule()
    for name in _NOW_MODULES:
        patch(importlib.import_module(name), "datetime", shim)
    for name in _UTCNOW_MODULES:
        patch(importlib.import_module(name), "utcnow", VirtualDatetime.utcnow)
