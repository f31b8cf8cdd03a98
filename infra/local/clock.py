"""A virtual clock for the local stack: the engine and the handlers read one time, which skips ahead.

The state machine that deploys carries real intervals (retry backoff of seconds, waits and
timeouts of days). On the local stack every one of them is a timer on this clock, and the
handlers read the same clock through ``longstep.clock.now()``. Time stands still while anything
can happen, and jumps to the earliest timer when nothing can: the model is Temporal's
time-skipping test server. "Nothing can happen" means:

- no engine thread is runnable: every thread moto's Step Functions engine started is parked on a
  timer (a Wait state, a task or heartbeat timeout, a retry backoff) or on an event that only
  another thread can set (a task token, a Map's iterations), or has ended;
- no Lambda handler is running;
- nobody holds the clock (:meth:`VirtualClock.hold`: the local runner while it still has
  signals to send or humans to ask, a test while it plays a human).

So a 7-day approval timeout, a 3-day TTL and a 1-hour timer each fire at their virtual time,
with no wall-clock floor, in the same order on a loaded machine as on an idle one. The patches
that route moto's waits here are in :mod:`longstep_kit.local.moto_patches`.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator

# 2026-01-01T00:00:00Z: every local run starts at the same virtual instant, so timestamps that
# reach a transcript (a timer's end) are the same on every run.
EPOCH = 1_767_225_600.0

Listener = Callable[[float], None]


@dataclass(eq=False)
class _Waiter:
    """One parked thread: woken by an event, by its deadline, or by a stop of its execution."""

    deadline: float | None
    seq: int
    counted: bool
    tag: Any
    interruptible: bool = True
    woken: bool = False


class VirtualClock:
    """Virtual time for the engine and the handlers, skipping ahead when nothing can happen.

    Attributes:
        retry_delays: every retry interval the engine waited, in order (virtual seconds).
        waits: every Wait state's duration, in order (virtual seconds).
        skipped_seconds: virtual seconds the clock jumped in total.
    """

    def __init__(self, start: float = EPOCH) -> None:
        self._cond = threading.Condition(threading.RLock())
        self._start = float(start)
        self._now = float(start)
        self._busy = 0  # runnable engine threads and running handlers
        self._holds = 0
        self._timers: set[_Waiter] = set()
        self._parked: set[_Waiter] = set()
        self._seq = itertools.count()
        self._listeners: list[Listener] = []
        self._skipper: threading.Thread | None = None
        self._running = False
        self.retry_delays: list[float] = []
        self.waits: list[float] = []
        self.skipped_seconds = 0.0

    # -- reading and moving time ---------------------------------------------------------------

    def time(self) -> float:
        """Virtual now, in epoch seconds (what ``longstep.clock.now()`` returns on the local stack)."""
        with self._cond:
            return self._now

    def advance(self, seconds: float) -> None:
        """Move virtual time forward by ``seconds`` (a test's or an operator's explicit jump).

        Timers due by then fire in deadline order, each once the engine has settled after the
        previous one; TTL and other listeners see every instant a timer fires at, then the end.
        """
        with self._cond:
            target = self._now + seconds
            self._holds += 1  # the skipper must not jump past ``target`` meanwhile
        try:
            while True:
                with self._cond:
                    self._cond.wait_for(lambda: self._busy == 0)
                    due = self._earliest()
                    if due is None or due.deadline > target:  # type: ignore[operator]
                        break
                    self._fire(due)
            self._move_to(target)
        finally:
            with self._cond:
                self._holds -= 1
                self._cond.notify_all()

    def rewind(self) -> bool:
        """Go back to the start instant for a new run, if nothing is in flight on the clock.

        Runs on one stack (a test module's, ``local run --serve``'s) each start at the same
        virtual instant, so a transcript that carries a timer's end is the same on a shared stack
        as on a fresh one. Time never goes back under a live execution: with an engine thread
        running or parked, or a handler running, this does nothing (the new run starts at the
        current time). Holds do not matter: a test may hold the clock around a whole run.

        Returns:
            True when the clock was rewound (or already at its start).
        """
        with self._cond:
            if self._busy or self._parked or self._timers:
                return False
            self._now = self._start
            return True

    def on_advance(self, listener: Listener) -> None:
        """Call ``listener(now)`` each time virtual time moves (DynamoDB TTL, for one)."""
        self._listeners.append(listener)

    def hold(self) -> None:
        """Keep time from skipping until :meth:`release` (someone is about to act)."""
        with self._cond:
            self._holds += 1

    def release(self) -> None:
        """Undo one :meth:`hold`."""
        with self._cond:
            self._holds -= 1
            assert self._holds >= 0, "VirtualClock.release without hold"
            self._cond.notify_all()

    @property
    def holding(self) -> int:
        """How many holds are in place."""
        with self._cond:
            return self._holds

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Time does not skip inside this block (a test playing a human, for one)."""
        self.hold()
        try:
            yield
        finally:
            self.release()

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        """Mark work in progress (a Lambda handler running): time does not skip meanwhile."""
        with self._cond:
            self._busy += 1
        try:
            yield
        finally:
            with self._cond:
                self._busy -= 1
                self._cond.notify_all()

    def idle(self) -> bool:
        """True when nothing runs and nobody holds the clock (what the skipper waits for)."""
        with self._cond:
            return self._busy == 0 and self._holds == 0

    # -- parking engine threads ----------------------------------------------------------------

    def sleep(self, seconds: float, *, retry: bool = False) -> None:
        """Park the calling thread for ``seconds`` of virtual time."""
        if retry:
            with self._cond:
                self.retry_delays.append(seconds)
        if seconds > 0:
            self.park(seconds, lambda: False)

    def park(
        self,
        timeout: float | None,
        done: Callable[[], bool],
        register: Callable[[_Waiter], None] | None = None,
        interruptible: bool = True,
    ) -> bool:
        """Park the calling thread until ``done()``, its virtual ``timeout``, or a stop of its execution.

        Args:
            timeout: virtual seconds, or None for no deadline.
            done: checked under the clock's lock; whoever makes it true wakes the waiter
                (:meth:`wake`) so the busy count moves with it.
            register: called with the waiter before parking (an event keeps its waiters).
            interruptible: a stop of the execution wakes it (a task token, a timer); False
                for a wait on other engine threads, which end by themselves once stopped.

        Returns:
            ``done()`` once woken.
        """
        with self._cond:
            if done():
                return True
            current = threading.current_thread()
            waiter = _Waiter(
                deadline=None if timeout is None else self._now + max(timeout, 0.0),
                seq=next(self._seq),
                counted=isinstance(current, CountedThread),
                tag=getattr(current, "clock_tag", None),
                interruptible=interruptible,
            )
            if register is not None:
                register(waiter)
            if waiter.counted:
                self._busy -= 1
            if waiter.deadline is not None:
                self._timers.add(waiter)
            self._parked.add(waiter)
            self._cond.notify_all()
            while not waiter.woken:
                self._cond.wait()
            self._parked.discard(waiter)
            self._timers.discard(waiter)
            return done()

    def wake(self, waiter: _Waiter) -> None:
        """Wake one parked waiter; it counts as busy from now (call with the lock held)."""
        if not waiter.woken:
            waiter.woken = True
            if waiter.counted:
                self._busy += 1
            self._timers.discard(waiter)
            self._cond.notify_all()

    def interrupt(self, tag: Any) -> int:
        """Wake every waiter parked by the threads of ``tag`` (a stopped execution); how many."""
        with self._cond:
            found = [w for w in self._parked if w.tag is tag and w.interruptible and not w.woken]
            for waiter in found:
                self.wake(waiter)
            return len(found)

    def thread_started(self) -> None:
        with self._cond:
            self._busy += 1

    def thread_ended(self) -> None:
        with self._cond:
            self._busy -= 1
            self._cond.notify_all()

    @property
    def lock(self) -> threading.Condition:
        return self._cond

    # -- skipping ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start skipping ahead whenever nothing can happen."""
        self._running = True
        self._skipper = threading.Thread(target=self._skip_loop, name="longstep-virtual-clock", daemon=True)
        self._skipper.start()

    @contextlib.contextmanager
    def skipping(self) -> Iterator[None]:
        """Skip ahead whenever nothing can happen, for the block (a scripted run on a served stack,
        whose clock otherwise moves in real time); as before, after it."""
        was = self._running
        if not was:
            self.start()
        try:
            yield
        finally:
            if not was:
                self.stop()

    def stop(self) -> None:
        with self._cond:
            self._running = False
            self._cond.notify_all()
        if self._skipper is not None:
            self._skipper.join(timeout=5)
            self._skipper = None

    def _earliest(self) -> _Waiter | None:
        return min(self._timers, key=lambda w: (w.deadline, w.seq), default=None)

    def _skip_loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: not self._running or (self._busy == 0 and self._holds == 0 and self._timers))
                if not self._running:
                    return
                due = self._earliest()
                assert due is not None and due.deadline is not None
                target = due.deadline
            if target > self.time():
                self._move_to(target)
            with self._cond:
                # Fire it only if nothing woke meanwhile (a listener's work, a late event).
                if self._busy == 0 and self._holds == 0 and due in self._timers:
                    self._fire(due)

    def _fire(self, waiter: _Waiter) -> None:
        assert waiter.deadline is not None
        if waiter.deadline > self._now:
            self._move_to(waiter.deadline)
        self.wake(waiter)

    def _move_to(self, target: float) -> None:
        with self._cond:
            if target <= self._now:
                return
            self.skipped_seconds += target - self._now
            self._now = target
        for listener in list(self._listeners):
            listener(target)


class CountedThread(threading.Thread):
    """A moto engine thread: runnable (busy on the clock) from ``start()`` until its target returns.

    It carries its execution's tag (inherited from the thread that started it) so a
    StopExecution can wake every waiter of that execution.
    """

    clock: VirtualClock  # set on the subclass the clock's patches create
    clock_tag: Any = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        target = kwargs.get("target", args[1] if len(args) > 1 else None)
        owner = getattr(target, "__self__", None)
        # An execution's first thread is started with the worker's own method: the worker is the tag.
        self.clock_tag = owner if type(owner).__name__ == "ExecutionWorker" else getattr(threading.current_thread(), "clock_tag", None)
        self._finished = ClockEvent(self.clock, interruptible=False)

    def start(self) -> None:
        self.clock.thread_started()
        try:
            super().start()
        except BaseException:
            self.clock.thread_ended()
            raise

    def run(self) -> None:
        try:
            super().run()
        finally:
            with self.clock.lock:
                self.clock.thread_ended()
                self._finished.set()

    def join(self, timeout: float | None = None) -> None:
        if self._finished.wait(timeout):
            super().join()  # the thread is past its target: this returns at once


class ClockEvent:
    """``threading.Event`` whose timed waits are timers on the virtual clock.

    Args:
        interruptible: a StopExecution wakes its waiters (see :meth:`VirtualClock.park`).
    """

    def __init__(self, clock: VirtualClock, interruptible: bool = True) -> None:
        self._clock = clock
        self._interruptible = interruptible
        self._flag = False
        self._waiters: list[_Waiter] = []

    def is_set(self) -> bool:
        return self._flag

    isSet = is_set

    def set(self) -> None:
        with self._clock.lock:
            self._flag = True
            for waiter in self._waiters:
                self._clock.wake(waiter)
            self._waiters.clear()

    def clear(self) -> None:
        with self._clock.lock:
            self._flag = False

    def wait(self, timeout: float | None = None) -> bool:
        if timeout is not None and timeout <= 0:
            return self._flag
        woken = self._clock.park(timeout, lambda: self._flag, self._waiters.append, self._interruptible)
        with self._clock.lock:
            self._waiters[:] = [w for w in self._waiters if not w.woken]
        return woken
