"""A local clock: waits inside moto's Step Functions engine pass faster than real time.

The same state machine definition that deploys carries real intervals (retry backoff of seconds,
waits of days). moto waits them in real time, so the local stack scales them at the point where
the engine sleeps, and keeps the virtual time that passed, and every computed retry delay, for
reports and tests.
"""

from __future__ import annotations

import threading
import time as _time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class LocalClock:
    """Scales the engine's waits: retry backoff by ``scale``, Wait states and task timeouts by
    ``wait_scale`` (1e-6: a 3-day approval timeout would fire after 0.26 s, a 7-day one after 0.6 s;
    see ``min_timeout_seconds``).

    Timeouts a state does not declare (the engine's default of 99,999,999 s) are left alone, so
    a Lambda task is never cut short by the scaling. A declared timeout also covers the task's own
    Lambda invocation, which runs at real speed: scaled, it never drops below
    ``min_timeout_seconds`` of wall time (nor rises above its unscaled value), so a 3-day approval
    timeout cannot fire while RequestApproval itself is still running on a busy machine.

    Attributes:
        scale: real seconds per virtual second of retry backoff.
        wait_scale: real seconds per virtual second of Wait states, task timeouts and heartbeats.
        min_timeout_seconds: the least wall time a declared timeout or heartbeat lasts, scaled.
        skipped_seconds: virtual seconds the engine waited in total.
        retry_delays: every retry interval the engine computed, in order (virtual seconds).
        waits: every Wait state's duration, in order (virtual seconds).
    """

    scale: float = 0.01
    wait_scale: float = 1e-6
    min_timeout_seconds: float = 1.0
    skipped_seconds: float = 0.0
    retry_delays: list[float] = field(default_factory=list)
    waits: list[float] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _patched: list[tuple[Any, str, Any]] = field(default_factory=list)

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.skipped_seconds += seconds
            self.retry_delays.append(seconds)
        _time.sleep(seconds * self.scale)

    def install(self) -> None:
        """Patch the retrier's sleep, Wait states, task timeouts and heartbeats in moto's ASL interpreter."""
        from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl
        from moto.stepfunctions.parser.asl.component.common.timeouts.heartbeat import Heartbeat
        from moto.stepfunctions.parser.asl.component.common.timeouts.timeout import Timeout
        from moto.stepfunctions.parser.asl.component.state.wait.wait_function.wait_function import WaitFunction

        clock = self

        class _ScaledTime:
            """The ``time`` module as the retrier sees it: only ``sleep`` is scaled."""

            def __getattr__(self, name: str) -> Any:
                return getattr(_time, name)

            @staticmethod
            def sleep(seconds: float) -> None:
                clock.sleep(seconds)

        self._patched.append((retrier_decl, "time", retrier_decl.time))
        retrier_decl.time = _ScaledTime()

        def wait_interval(component: Any, env: Any, wait_seconds: float) -> None:
            with clock._lock:
                clock.skipped_seconds += max(wait_seconds, 0)
                clock.waits.append(wait_seconds)
            if wait_seconds > 0:
                env.program_state_event.wait(wait_seconds * clock.wait_scale)

        def scaled_seconds(original: Any) -> Any:
            def eval_body(component: Any, env: Any) -> None:
                original(component, env)
                if not component.is_default_value():
                    seconds = env.stack.pop()
                    env.stack.append(min(seconds, max(seconds * clock.wait_scale, clock.min_timeout_seconds)))

            return eval_body

        for owner, name, replacement in (
            (WaitFunction, "_wait_interval", wait_interval),
            (Timeout, "_eval_body", scaled_seconds(Timeout._eval_body)),
            (Heartbeat, "_eval_body", scaled_seconds(Heartbeat._eval_body)),
        ):
            self._patched.append((owner, name, owner.__dict__[name]))
            setattr(owner, name, replacement)

    def uninstall(self) -> None:
        while self._patched:
            module, name, original = self._patched.pop()
            setattr(module, name, original)
