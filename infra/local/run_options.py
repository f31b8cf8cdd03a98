"""How a local scenario run behaves (``RunOptions``, with the ``--approve`` modes) and the error it
raises when it cannot finish. Agent runs (``local/runner.py``) and workflow runs
(``local/workflow_run.py``) take the same options."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Literal

from longstep_kit.local.faults import Fault

ApproveMode = Literal["auto", "reject", "interactive", "external"]


class LocalRunError(RuntimeError):
    """A local run could not finish (for example it waited longer than its time limit)."""


@dataclass
class RunOptions:
    """How a local run behaves.

    Attributes:
        approve: ``auto`` applies the scenario's decisions (each to the scripted call it was
            written for) and approves the rest; an outcome-unknown escalation (the tool's probe
            could not tell, or it has none) is aborted, since a scripted human cannot look at the
            world and a guess would hide a lost effect or make a duplicate; other escalations are
            retried once, then aborted; ``reject`` rejects every request and
            aborts escalations; ``interactive`` asks; ``external`` answers nothing: someone else
            does, in this process (the ``longstep`` approval commands, the approval API's handler).
        run_id: the run id (defaults to the scenario's, else the scenario's name).
        execution_name: the first execution's name (defaults to the run id).
        faults: crashes to inject.
        restart_at: stop the execution when turn N starts and resume the run in a new one.
        throttle: the fraction of model and tool calls that fail with a throttling error.
        seed: makes ``throttle`` reproducible.
        emit: where progress lines go (None: silent).
        timeout_seconds: give up after this long.
        page_link: ``interactive``: the decision page's link of a request (the approval pages,
            ``local/pages_server.py``), printed with it.
    """

    approve: ApproveMode = "auto"
    run_id: str | None = None
    execution_name: str | None = None
    faults: list[Fault] = field(default_factory=list)
    restart_at: int | None = None
    throttle: float = 0.0
    seed: int = 0
    emit: Callable[[str], None] | None = None
    timeout_seconds: float = 300.0
    page_link: Callable[[str], str | None] | None = None
