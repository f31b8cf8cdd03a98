"""A shared rate limit per model: a token bucket in DynamoDB that every run draws from before a call.

Bedrock's quotas are per model, per account and Region, in requests and in tokens (input and
output together) per minute: https://docs.aws.amazon.com/bedrock/latest/userguide/quotas-runtime.html.
So is the bucket: one item per model (``ratelimit#<model id>``, ``bucket``) holding two levels,
requests and tokens, and the time they were computed at. It holds at most ``burst_seconds`` of the
quota and refills at the rest of it per minute, so no 60-second window carries more than the quota.

A draw is a reservation: the levels go down by one call (and ``tokens_per_call``) at once, below
zero if need be, and the draw answers how many seconds until they would have been back at zero.
The run waits that long in a Step Functions Wait state (no Lambda runs meanwhile) and then makes
its call: waiting runs are served in the order they drew, with no thundering herd of retries. The
write is conditional on the levels as read (optimistic concurrency), so concurrent draws never
reserve the same capacity twice. A draw lost to a crash is simply drawn again: capacity reserved
and not used slows the fleet a little, it never lets it pass the quota.

A call's tokens are not known before it: a draw counts ``tokens_per_call``. A run's next draw
corrects the bucket with the recorded usage of its replies since its last correction
(``correction``): the difference is drawn too (a reply larger than the estimate) or given back
(smaller, up to the bucket's capacity), in one transaction with the run record's count of the
turns corrected, so a retried draw never corrects twice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from longstep import clock, keys
from longstep.contract.run import RATE_COUNTED, RunRecord
from longstep.fleet import RateSettings

BUCKET_PREFIX = "ratelimit#"
BUCKET = "bucket"
COUNTED = RATE_COUNTED  # the run record's turns whose replies corrected the bucket (below it)
_TRIES = 50


@dataclass(frozen=True)
class Draw:
    """What a draw reserved: wait ``wait_seconds`` (an integer, for the Wait state), then call."""

    wait_seconds: int
    requests_level: float
    tokens_level: float


@dataclass
class Buckets:
    """The models' token buckets, in the checkpoint table."""

    client: Any
    table: str

    def _key(self, model_id: str) -> dict[str, Any]:
        schema = keys.checkpoint_table()
        return {schema.partition_key: {"S": BUCKET_PREFIX + model_id}, schema.sort_key: {"S": BUCKET}}

    def draw(
        self, model_id: str, rate: RateSettings, now: float | None = None, correct: Callable[[], tuple[float, dict[str, Any] | None]] | None = None
    ) -> Draw:
        """Reserve one call of ``model_id``; how long to wait before making it.

        Args:
            correct: read at each attempt: the tokens to draw besides the call's (negative: to
                give back) and the transaction item that records them as counted (``correction``).

        Raises:
            RuntimeError: the bucket changed under every one of ``_TRIES`` attempts.
        """
        requests_cap, requests_rate = _shape(rate.requests_per_minute, rate.burst_seconds)
        tokens_cap, tokens_rate = _shape(rate.tokens_per_minute, rate.burst_seconds)
        for _ in range(_TRIES):
            extra, counted = (0.0, None) if correct is None else correct()
            at = clock.now() if now is None else now
            item = self.client.get_item(TableName=self.table, Key=self._key(model_id), ConsistentRead=True).get("Item")
            if item is None:
                requests, tokens, since, version = requests_cap, tokens_cap, at, 0
            else:
                requests, tokens = float(item["requests"]["N"]), float(item["tokens"]["N"])
                since, version = float(item["at"]["N"]), int(item["version"]["N"])
            elapsed = max(0.0, at - since)
            requests = min(requests_cap, requests + elapsed * requests_rate) - 1
            tokens = min(tokens_cap, tokens + elapsed * tokens_rate - extra) - rate.tokens_per_call
            wait = max(0.0, -requests / requests_rate, -tokens / tokens_rate)
            condition = "attribute_not_exists(#version)" if item is None else "#version = :seen"
            values = {
                ":requests": {"N": repr(requests)},
                ":tokens": {"N": repr(tokens)},
                ":at": {"N": repr(max(at, since))},
                ":version": {"N": str(version + 1)},
            }
            if item is not None:
                values[":seen"] = {"N": str(version)}
            update = {
                "TableName": self.table,
                "Key": self._key(model_id),
                "UpdateExpression": "SET #requests = :requests, #tokens = :tokens, #at = :at, #version = :version",
                "ConditionExpression": condition,
                "ExpressionAttributeNames": {"#requests": "requests", "#tokens": "tokens", "#at": "at", "#version": "version"},
                "ExpressionAttributeValues": values,
            }
            try:
                if counted is None:
                    self.client.update_item(**update)
                else:  # the bucket and the run's count together, or neither
                    self.client.transact_write_items(TransactItems=[{"Update": update}, counted])
            except (self.client.exceptions.ConditionalCheckFailedException, self.client.exceptions.TransactionCanceledException):
                continue  # another run drew meanwhile (or this run's count moved on): read again
            return Draw(math.ceil(wait - 1e-9), requests, tokens)
        raise RuntimeError(f"rate limit of {model_id}: the bucket changed under {_TRIES} draws in a row")


def correction(store: Any, run_id: str, tokens_per_call: int) -> tuple[float, dict[str, Any] | None]:
    """The tokens the run's replies recorded since its last correction used beyond the
    ``tokens_per_call`` each one drew (negative: less), and the transaction item that moves the
    run record's count past them (only if the count is still the one read); (0, None) when no
    reply is new. Read from the raw records: only the replies' usage is needed."""
    from longstep.store import steps_of

    stored = store.get(run_id, keys.RUN_RECORD)
    seen = None if stored is None else RunRecord.from_dict(stored).budgets.rate_counted
    upto = int(seen or 0)
    replies = [s for s in steps_of(store.query_between(run_id, keys.turn_key(upto), keys.STEP_PREFIX + "~")) if s.kind == keys.MODEL]
    if not replies:
        return 0.0, None
    used = sum(int(u.get("inputTokens", 0)) + int(u.get("outputTokens", 0)) for u in ((s.result or {}).get("usage") or {} for s in replies))
    schema = keys.checkpoint_table()
    update: dict[str, Any] = {
        "TableName": store.table_name,
        "Key": {schema.partition_key: {"S": run_id}, schema.sort_key: {"S": keys.RUN_RECORD}},
        "UpdateExpression": "SET #counted = :upto",
        "ConditionExpression": "attribute_not_exists(#counted)" if seen is None else "#counted = :seen",
        "ExpressionAttributeNames": {"#counted": COUNTED},
        "ExpressionAttributeValues": {":upto": {"N": str(max(keys.parse(s.sk).turn for s in replies) + 1)}},
    }
    if seen is not None:
        update["ExpressionAttributeValues"][":seen"] = {"N": str(upto)}
    return float(used - tokens_per_call * len(replies)), {"Update": update}


def _shape(per_minute: int, burst_seconds: int) -> tuple[float, float]:
    """(capacity, refill per second): a burst of ``burst_seconds`` of the quota, the rest refilled
    over the minute, so capacity + 60 s of refill is the quota."""
    capacity = max(1.0, per_minute * burst_seconds / 60)
    return capacity, max(per_minute - capacity, 1e-9) / 60
