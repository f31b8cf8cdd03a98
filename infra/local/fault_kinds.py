"""Faults beyond a crash at a step boundary: a zombie invocation, a lost acknowledgement, clock skew.

Each is written like a crash point, ``KIND.WHAT@N``:

- ``zombie.POINT@N[:RUN]``: the invocation that reaches POINT in turn N stalls there past its
  step lock's expiry; Step Functions' retry (a task timeout in AWS) takes over and completes the
  step; then the stalled invocation resumes and goes on writing. It must neither act twice nor
  overwrite the winner's record.
- ``lost_ack.OPERATION@N``: the N-th (from 0) OPERATION request of the run (``PutItem``,
  ``UpdateItem``, ``PutObject``, ``SendTaskSuccess``, ...) is carried out, and its response is
  lost on the way back: the client sees a read timeout after the write took effect, and its SDK
  sends the request again (botocore retries a read timeout), as over a real network.
- ``skew.TASK@SECONDS``: every invocation of TASK (a function's module, ``call_tool``,
  ``approval_api``, ...) reads the clock SECONDS off (negative: behind), as a handler on another
  machine does.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any, Callable

ZOMBIE = "zombie"
LOST_ACK = "lost_ack"
SKEW = "skew"
KINDS = (ZOMBIE, LOST_ACK, SKEW)

# The writes whose response may be lost: DynamoDB's, S3's object puts and a task token's answer.
LOST_ACK_OPERATIONS = (
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "BatchWriteItem",
    "TransactWriteItems",
    "PutObject",
    "SendTaskSuccess",
    "SendTaskFailure",
)
# The functions' modules (``longstep_functions.<task>.lambda_handler``) a skew may be given to.
SKEW_TASKS = (
    "approval_api",
    "call_tool",
    "check_condition",
    "child_failed",
    "continue_as_new",
    "delegate_to_subagent",
    "escalate",
    "finish",
    "init_run",
    "model_turn",
    "pause",
    "request_approval",
    "wait_for_event",
    "workflow",
)


def kind_of(point: str) -> str | None:
    """``zombie`` for ``zombie.after_model`` (None for a plain crash point)."""
    kind, sep, _ = point.partition(".")
    return kind if sep and kind in KINDS else None


def check_kind(spec: str, point: str, number: str, crash_points: tuple[str, ...]) -> int:
    """Validate ``KIND.WHAT@N`` and return N.

    Raises:
        ValueError: a one-line message naming the bad part (the caller wraps it in its spec error).
    """
    kind, _, what = point.partition(".")
    if kind == ZOMBIE and what not in crash_points:
        raise ValueError(f"--fault {spec!r}: a zombie stalls at a step point; known: {', '.join(crash_points)}")
    if kind == LOST_ACK and what not in LOST_ACK_OPERATIONS:
        raise ValueError(f"--fault {spec!r}: unknown operation {what!r}; known: {', '.join(LOST_ACK_OPERATIONS)}")
    if kind == SKEW:
        if what not in SKEW_TASKS:
            raise ValueError(f"--fault {spec!r}: unknown task {what!r}; known: {', '.join(SKEW_TASKS)}")
        try:
            return int(number)
        except ValueError:
            raise ValueError(f"--fault {spec!r}: expected skew.TASK@SECONDS, e.g. skew.approval_api@-600") from None
    if not number.isdigit():
        raise ValueError(f"--fault {spec!r}: expected {kind}.{what or 'WHAT'}@N with N a number")
    return int(number)


class LostAcks:
    """Loses the response of chosen write requests after moto carried them out.

    moto answers every in-process AWS call from one ``before-send`` handler (its botocore
    stubber); wrapping it, the request is served and then a ``ReadTimeoutError`` is raised
    instead of returning the response. botocore treats that as a connection error and sends the
    request again, with its normal retries; the handler sees whatever the retry gets.

    Args:
        take: called with (operation, index); True when that request's response is to be lost.
    """

    def __init__(self, take: Callable[[str, int], bool]) -> None:
        self._take = take
        self._counts: Counter = Counter()
        self._guard = threading.Lock()
        self._original: Any = None

    def install(self) -> None:
        from moto.core.botocore_stubber import BotocoreStubber

        self._original = BotocoreStubber.__call__
        original, lose = self._original, self._lose

        def call(stubber: Any, event_name: str, request: Any, **kwargs: Any) -> Any:
            response = original(stubber, event_name, request, **kwargs)
            if response is not None and response.status_code < 300:
                lose(event_name.rpartition(".")[2], request)
            return response

        BotocoreStubber.__call__ = call  # type: ignore[method-assign]

    def uninstall(self) -> None:
        from moto.core.botocore_stubber import BotocoreStubber

        if self._original is not None:
            BotocoreStubber.__call__ = self._original  # type: ignore[method-assign]
            self._original = None

    def _lose(self, operation: str, request: Any) -> None:
        from botocore.exceptions import ReadTimeoutError

        if operation not in LOST_ACK_OPERATIONS:
            return
        with self._guard:
            index = self._counts[operation]
            self._counts[operation] += 1
        if self._take(operation, index):
            raise ReadTimeoutError(endpoint_url=request.url)


class Current:
    """The invocation each thread is running (the dispatcher's hooks set it): what a zombie's
    takeover invokes again, and the clock offset a skew gives it.

    Args:
        skews: task -> seconds its invocations read the clock off.
    """

    def __init__(self, skews: dict[str, int]) -> None:
        self.skews = skews
        self._local = threading.local()

    def started(self, invocation: Any) -> None:
        from longstep import clock

        stack = getattr(self._local, "stack", [])
        offset = self.skews.get(invocation.task)
        token = None if offset is None else clock.set_offset(offset)
        self._local.stack = [*stack, (invocation, token)]

    def ended(self, invocation: Any) -> None:
        from longstep import clock

        stack = getattr(self._local, "stack", [])
        if stack and stack[-1][0] is invocation:
            _, token = stack.pop()
            if token is not None:
                clock.reset_offset(token)

    def invocation(self) -> Any:
        """The invocation running in this thread (the innermost), or None."""
        stack = getattr(self._local, "stack", [])
        return stack[-1][0] if stack else None
