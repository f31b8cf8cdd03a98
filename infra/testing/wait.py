"""Waiting for an execution, or any condition, with a bound: never an unbounded spin loop."""

from __future__ import annotations

import time
from typing import Any, Callable, TypeVar

T = TypeVar("T")


class WaitTimeoutError(TimeoutError):
    """What was waited for did not happen within the time allowed."""


def wait_until(what: str, check: Callable[[], T], timeout: float = 60.0, first_poll: float = 0.005, max_poll: float = 0.2) -> T:
    """Call ``check`` until it returns something truthy, polling with a growing interval.

    Args:
        what: what is awaited, for the error message.
        check: returns a falsy value while waiting.
        timeout: wall seconds before giving up (a bound on a hang, not a timing assertion).
        first_poll, max_poll: the polling interval starts at ``first_poll`` and doubles up to
            ``max_poll`` (a condition that comes fast is seen fast, a slow one costs few calls).

    Returns:
        ``check``'s first truthy result.

    Raises:
        WaitTimeoutError: ``check`` stayed falsy for ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    interval = first_poll
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() >= deadline:
            raise WaitTimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)  # bounded polling, not a timing assumption
        interval = min(interval * 2, max_poll)


def wait_execution(sfn: Any, arn: str, timeout: float = 60.0) -> dict[str, Any]:
    """Wait until execution ``arn`` is no longer RUNNING and return its description.

    Args:
        sfn: a Step Functions client.
        arn: the execution's ARN.
        timeout: wall seconds before giving up.

    Raises:
        WaitTimeoutError: still RUNNING after ``timeout`` seconds.
    """

    def ended() -> dict[str, Any] | None:
        described = sfn.describe_execution(executionArn=arn)
        return described if described["status"] != "RUNNING" else None

    return wait_until(f"execution {arn.rsplit(':', 1)[-1]} to end", ended, timeout)
