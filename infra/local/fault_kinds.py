"""Faults beyond a crash at a step boundary: a zombie invocation, a lost acknowledgement, clock skew.

Each is written like a crash point, ``KIND.WHAT@N``:

- ``zombie.POINT@N[:RUN]``: the invocation that reaches POINT in turn N stalls there past its
  step lock's expiry; Step Functions' retry (a task timeout in AWS) takes over and completes the
  step; then the stalled invocation resumes and goes on writing. It must neither act twice nor
  overwrite the winner's record.
- ``lost_ack.OPERATION@N[:TARGET]``: the N-th (from 0) OPERATION request of the run
  (``PutItem``, ``UpdateItem``, ``PutObject``, ``SendTaskSuccess``, ...), counting only those
  whose table name or URL contains TARGET (in any case) when given, is carried out, and its response is lost on
  the way back: the client sees a read timeout after the write took effect, and its SDK sends the
  request again (botocore retries a read timeout), as over a real network. (A run's parallel
  tool calls interleave their requests: TARGET picks one table's writes.)
- ``kill.TASK@N[:OPERATION[:TARGET]]``: the invocation of TASK (a function's module, as for
  skew; ``CallTool`` is ``call_tool``) that makes the run's N-th (from 0) write by TASK (counting
  only OPERATION's, one of the lost acknowledgement's operations, when given; and only those on a
  table or URL containing TARGET, in any case, when given) is SIGKILLed for real: its worker
  process dies after moto carried the write out and before the response leaves. Only a stack whose Lambdas
  run in worker processes can (``local/worker_pool.py``, ``local/worker_routes.py``); a local run
  with a kill planned serves its stack so.
- ``skew.TASK@SECONDS``: every invocation of TASK (a function's module, ``call_tool``,
  ``approval_api``, ...) reads the clock SECONDS off (negative: behind), as a handler on another
  machine does.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Any, Callable

from longstep_kit.local.moto_patches.registry import harness, patch, undo

ZOMBIE = "zombie"
LOST_ACK = "lost_ack"
SKEW = "skew"
KILL = "kill"
KINDS = (ZOMBIE, LOST_ACK, SKEW, KILL)

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


def task_name(what: str) -> str:
    """A task as the functions' modules name it: ``call_tool`` for ``CallTool`` or ``call_tool``."""
    import re

    return re.sub(r"(?<!^)(?=[A-Z])", "_", what).lower()


def check_kill(spec: str, what: str, number: str, where: str) -> str:
    """Validate ``kill.TASK@N[:OPERATION[:TARGET]]``; the point as planned (``kill.call_tool``).

    Raises:
        ValueError: a one-line message naming the bad part.
    """
    task = task_name(what)
    if task not in SKEW_TASKS:
        raise ValueError(f"--fault {spec!r}: unknown task {what!r}; known: {', '.join(SKEW_TASKS)}")
    if not number.isdigit():
        raise ValueError(f"--fault {spec!r}: expected kill.TASK@N[:OPERATION[:TARGET]] with N a number, e.g. kill.call_tool@0:PutItem:checkpoint")
    operation = where.partition(":")[0]
    if where and operation not in LOST_ACK_OPERATIONS:
        raise ValueError(f"--fault {spec!r}: unknown operation {operation!r}; known: {', '.join(LOST_ACK_OPERATIONS)}")
    return f"{KILL}.{task}"


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
        targets: the (operation, target or None) pairs planned: each counts its own requests.
        take: called with (operation, target, index); True when that request's response is to be lost.
    """

    def __init__(self, targets: set[tuple[str, str | None]], take: Callable[[str, str | None, int], bool]) -> None:
        self._targets = targets
        self._take = take
        self._counts: Counter = Counter()
        self._guard = threading.Lock()
        self._original: Any = None
        self._answered: set[bytes] = set()  # task-token answers whose response was lost

    def install(self) -> None:
        lost_acknowledgements(self)

    def uninstall(self) -> None:
        from moto.core.botocore_stubber import BotocoreStubber

        if self._original is not None:
            undo(BotocoreStubber, "__call__")
            self._original = None

    def _lose(self, operation: str, request: Any) -> None:
        from botocore.exceptions import ReadTimeoutError

        if operation not in LOST_ACK_OPERATIONS:
            return
        text = f"{request.url} {_table_name(request)}"
        for op, target in self._targets:
            if op != operation or (target is not None and target.lower() not in text.lower()):
                continue
            with self._guard:
                index = self._counts[(op, target)]
                self._counts[(op, target)] += 1
            if self._take(operation, target, index):
                if operation in _TOKEN_ANSWERS:
                    with self._guard:
                        self._answered.add(bytes(request.body or b""))
                raise ReadTimeoutError(endpoint_url=request.url)


def _table_name(request: Any) -> str:
    """A DynamoDB request's table (its JSON body's ``TableName``), else empty."""
    body = request.body
    if isinstance(body, str):
        body = body.encode()
    if not isinstance(body, bytes) or b'"TableName"' not in body:
        return ""
    try:
        return str(json.loads(body).get("TableName", ""))
    except (ValueError, AttributeError):
        return ""


_TOKEN_ANSWERS = ("SendTaskSuccess", "SendTaskFailure")


def _task_closed(request: Any) -> Any:
    """What AWS answers the SDK's retry of a task token's answer that took effect: ``TaskTimedOut``
    ("the task associated with the token has already been closed",
    https://docs.aws.amazon.com/step-functions/latest/apireference/API_SendTaskSuccess.html).

    The local stack's fidelity check of closed tokens runs once per API call, before the SDK's
    retries, and moto takes a second answer while its engine has not closed the task yet: the
    retry is answered here.
    """
    from botocore.awsrequest import AWSResponse
    from moto.core.botocore_stubber import MockRawResponse

    body = json.dumps({"__type": "TaskTimedOut", "message": "Task Timed Out: the task of this token has already been closed"})
    return AWSResponse(request.url, 400, {"Content-Type": "application/x-amz-json-1.0"}, MockRawResponse(body))


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


@harness
def lost_acknowledgements(faults: LostAcks) -> None:
    """moto's stubber answers each request, then ``faults`` may lose the response (a ``LostAcknowledgements``).

    A lost answer to a task token is remembered: the SDK's retry of it hears ``TaskTimedOut``, as
    AWS answers a second answer for a closed token.
    """
    from moto.core.botocore_stubber import BotocoreStubber

    def call(stubber: Any, event_name: str, request: Any, **kwargs: Any) -> Any:
        if event_name.rpartition(".")[2] in _TOKEN_ANSWERS and bytes(request.body or b"") in faults._answered:
            return _task_closed(request)
        response = original(stubber, event_name, request, **kwargs)
        if response is not None and response.status_code < 300:
            faults._lose(event_name.rpartition(".")[2], request)
        return response

    faults._original = original = patch(BotocoreStubber, "__call__", call)
