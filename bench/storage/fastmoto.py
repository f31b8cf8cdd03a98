"""Faster paths through moto's DynamoDB (benchmark harness only; nothing stored or read changes).

* Responses: moto 5.2 serializes every response by walking the botocore shape and trying several
  spellings of each member name; for item-heavy responses (a Query returning hundreds of step
  records) that is ~2 ms per item, which made a 1,000-turn Longstep run take most of an hour in
  moto alone. Item responses are already in DynamoDB's wire format once moto has converted its
  types (``dynamo_to_dict``), so they are written with ``json.dumps`` here (binary values base64,
  as the wire has them). The first responses of each operation go through both paths and must
  decode to the same JSON, otherwise the run stops.
* Key comparisons: every moto Query sorts the whole table by key, comparing ``DynamoType``
  objects through ``cast_value``; string-to-string comparisons here compare the strings directly
  (what ``cast_value`` returns for ``S``), everything else goes the original way.
* Old S3 bodies (:func:`keep_recent_bodies`, used by the two quadratic baselines only): at 1,000
  turns they write ~15 GB of snapshots each, which moto would keep in memory or spool to disk.
  Once an object is older than the newest few of its bucket its body is dropped; its size, ETag
  and listing stay, so the bytes counted are unchanged, and reading a dropped body raises
  :class:`EvictedBodyError` instead of returning wrong bytes.
"""

from __future__ import annotations

import base64
import json
from collections import Counter, deque
from typing import Any

OPERATIONS = frozenset({"Query", "GetItem", "Scan", "BatchGetItem", "PutItem", "UpdateItem", "DeleteItem"})
VERIFY_FIRST = 25

_installed = False
_verified: Counter[str] = Counter()
_headers: dict[str, dict[str, str]] = {}


class FastPathMismatch(RuntimeError):
    """The fast path would have answered differently from moto's serializer."""


def _default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, set):
        return sorted(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def _fast_comparisons() -> None:
    from moto.dynamodb.models.dynamo_type import DynamoType

    slow_eq, slow_lt = DynamoType.__eq__, DynamoType.__lt__

    def __eq__(self: Any, other: Any) -> bool:
        if other.__class__ is DynamoType and self.type == "S" and other.type == "S":
            return self.value == other.value
        return slow_eq(self, other)

    def __lt__(self: Any, other: Any) -> bool:
        if other.__class__ is DynamoType and self.type == "S" and other.type == "S":
            return self.value < other.value
        return slow_lt(self, other)

    DynamoType.__eq__ = __eq__  # type: ignore[method-assign]
    DynamoType.__lt__ = __lt__  # type: ignore[method-assign]


def install() -> None:
    """Patch moto's DynamoDB result class and key comparisons (idempotent)."""
    global _installed
    if _installed:
        return
    from moto.dynamodb.responses import DynamoResult

    _fast_comparisons()

    slow = DynamoResult.execute_result

    def execute_result(self: Any, context: Any) -> Any:
        op = context.operation_model.name
        if op not in OPERATIONS or not isinstance(self.result, dict):
            return slow(self, context)
        if _verified[op] < VERIFY_FIRST:
            status, headers, body = slow(self, context)
            fast = json.dumps(self.result, default=_default, separators=(",", ":"))
            if status != 200 or json.loads(body or "{}") != json.loads(fast):
                raise FastPathMismatch(f"{op}: moto's serializer and the fast path disagree")
            _verified[op] += 1
            _headers[op] = dict(headers)
            return status, headers, body
        return 200, dict(_headers[op]), json.dumps(self.result, default=_default, separators=(",", ":"))

    DynamoResult.execute_result = execute_result
    _installed = True


class EvictedBodyError(RuntimeError):
    """Something read an S3 body the benchmark had dropped (it would have read wrong bytes)."""


class _Evicted:
    def __init__(self, bucket: str, key: str) -> None:
        self.where = f"s3://{bucket}/{key}"

    def _fail(self, *_: Any, **__: Any) -> Any:
        raise EvictedBodyError(f"{self.where}: body dropped by bench.storage.fastmoto.keep_recent_bodies")

    seek = read = write = truncate = _fail

    def close(self) -> None:
        pass


_evict_buckets: dict[str, int] = {}
_recent: dict[str, deque[Any]] = {}
_evict_installed = False


def keep_recent_bodies(bucket: str, keep: int = 16) -> None:
    """Keep only the newest ``keep`` object bodies of ``bucket`` (sizes, ETags, listings stay)."""
    global _evict_installed
    _evict_buckets[bucket] = keep
    if _evict_installed:
        return
    from moto.s3.models import S3Backend

    put_object = S3Backend.put_object

    def put_and_evict(self: Any, bucket_name: str, key_name: str, *args: Any, **kwargs: Any) -> Any:
        key = put_object(self, bucket_name, key_name, *args, **kwargs)
        limit = _evict_buckets.get(bucket_name)
        if limit is not None:
            recent = _recent.setdefault(bucket_name, deque())
            recent.append(key)
            while len(recent) > limit:
                old = recent.popleft()
                with old.lock:
                    old.etag  # computed from the body now, kept afterwards  # noqa: B018
                    old._value_buffer.close()
                    old._value_buffer = _Evicted(bucket_name, old.name)
        return key

    S3Backend.put_object = put_and_evict
    _evict_installed = True
