"""The one retry type: a step kind's transient-error budget, configured in ``cdk.json`` and rendered
as the Step Functions Retry of the tasks of that kind.

Every task gets two retriers. Transient errors (``longstep.errors.retryable_error_names``) get
exponential backoff with full jitter and a capped delay. A step whose lock is held by another
invocation (``StepInProgressError``) gets its own, longer budget: the holder may have crashed,
and its lock only expires when the holder would have timed out, so the waits must add up to
more than the function's timeout.
Retrier fields: https://docs.aws.amazon.com/step-functions/latest/dg/concepts-error-handling.html
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from longstep.errors import lock_wait_error_names, retryable_error_names


class RetryPolicy(BaseModel):
    """One step kind's transient-error budget (full jitter is always on).

    Attributes:
        max_attempts: retries after the first attempt.
        interval_seconds: the first retry's delay.
        backoff_rate: each delay is this many times the previous one.
        max_delay_seconds: no delay is longer than this.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    max_attempts: int = Field(ge=0, le=20)
    interval_seconds: int = Field(default=1, ge=1, le=300)
    backoff_rate: float = Field(default=2.0, ge=1.0, le=10.0)
    max_delay_seconds: int = Field(default=60, ge=1, le=3600)

    # The lock-wait retrier: not configurable, its attempts follow from the function's timeout.
    LOCK_INTERVAL_SECONDS: ClassVar[int] = 2
    LOCK_MAX_DELAY_SECONDS: ClassVar[int] = 30

    def lock_attempts(self, function_timeout_seconds: float) -> int:
        """Attempts whose expected waits (full jitter halves them) outlast the function's timeout."""
        capped = math.ceil(2 * function_timeout_seconds / self.LOCK_MAX_DELAY_SECONDS)
        return min(capped + 4, 60)

    def retriers(self, function_timeout_seconds: float) -> list[dict[str, Any]]:
        """The task's ASL ``Retry`` list: the lock-wait retrier, then the transient one."""
        return [
            {
                "ErrorEquals": lock_wait_error_names(),
                "IntervalSeconds": self.LOCK_INTERVAL_SECONDS,
                "MaxAttempts": self.lock_attempts(function_timeout_seconds),
                "BackoffRate": self.backoff_rate,
                "MaxDelaySeconds": self.LOCK_MAX_DELAY_SECONDS,
                "JitterStrategy": "FULL",
            },
            {
                "ErrorEquals": retryable_error_names(),
                "IntervalSeconds": self.interval_seconds,
                "MaxAttempts": self.max_attempts,
                "BackoffRate": self.backoff_rate,
                "MaxDelaySeconds": self.max_delay_seconds,
                "JitterStrategy": "FULL",
            },
        ]

    def apply(self, state: Any, function_timeout: Any) -> None:
        """Add :meth:`retriers` to a CDK task state (``function_timeout``: a CDK ``Duration``)."""
        from aws_cdk import Duration
        from aws_cdk import aws_stepfunctions as sfn

        for retrier in self.retriers(function_timeout.to_seconds()):
            state.add_retry(
                errors=retrier["ErrorEquals"],
                interval=Duration.seconds(retrier["IntervalSeconds"]),
                max_attempts=retrier["MaxAttempts"],
                backoff_rate=retrier["BackoffRate"],
                max_delay=Duration.seconds(retrier["MaxDelaySeconds"]),
                jitter_strategy=sfn.JitterType[retrier["JitterStrategy"]],
            )


class RetryPolicies(BaseModel):
    """Transient-error budgets per step kind; a kind left out of the configuration keeps its default.

    Tools talk to flaky systems and get the largest budget; the model gets its own; bookkeeping
    tasks (Init, approvals, escalations, waits, hand-over, Finish) touch only DynamoDB and need few.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    model: RetryPolicy = RetryPolicy(max_attempts=6)
    tool: RetryPolicy = RetryPolicy(max_attempts=8)
    bookkeeping: RetryPolicy = RetryPolicy(max_attempts=4)
